import type { ExternalEventRow, RunWaits, ScheduleRow, TakeEventRequest, TimerRow, WaitRow } from './run-waits.js'

/** {@link RunWaits} in memory, for the `MemoryStore`: gone with the process. */
export class MemoryRunWaits implements RunWaits {
  readonly #timers = new Map<string, number>()
  readonly #events = new Map<string, ExternalEventRow>()
  readonly #waits = new Map<string, WaitRow>()
  readonly #schedules = new Map<string, ScheduleRow>()

  async setTimer(runId: string, wakeAt: number): Promise<void> {
    this.#timers.set(runId, wakeAt)
  }

  async getTimer(runId: string): Promise<number | undefined> {
    return this.#timers.get(runId)
  }

  async clearTimer(runId: string, wakeAt?: number): Promise<boolean> {
    return (wakeAt === undefined || this.#timers.get(runId) === wakeAt) && this.#timers.delete(runId)
  }

  async clearTimers(timers: readonly TimerRow[]): Promise<number> {
    return timers.filter((timer) => this.#timers.get(timer.runId) === timer.wakeAt && this.#timers.delete(timer.runId)).length
  }

  async dueTimers(now: number, limit: number): Promise<TimerRow[]> {
    return [...this.#timers]
      .filter(([, wakeAt]) => wakeAt <= now)
      .sort((a, b) => a[1] - b[1])
      .slice(0, limit)
      .map(([runId, wakeAt]) => ({ runId, wakeAt }))
  }

  async sendEvent(event: Omit<ExternalEventRow, 'takenBy'>): Promise<boolean> {
    if (this.#events.has(event.eventId)) return false
    this.#events.set(event.eventId, { ...event, takenBy: null })
    return true
  }

  async takeEvent({ name, match, takenBy }: TakeEventRequest): Promise<ExternalEventRow | undefined> {
    const events = [...this.#events.values()]
    const taken = events.find((event) => event.takenBy === takenBy)
    if (taken) return { ...taken }
    const free = events.filter((event) => event.name === name && event.match === match && event.takenBy === null).sort((a, b) => a.sentAt - b.sentAt)[0]
    if (!free) return undefined
    free.takenBy = takenBy
    return { ...free }
  }

  async listEvents(options: { name?: string; limit?: number } = {}): Promise<ExternalEventRow[]> {
    return [...this.#events.values()]
      .filter((event) => options.name === undefined || event.name === options.name)
      .reverse()
      .slice(0, options.limit ?? 100)
      .map((event) => ({ ...event }))
  }

  async setWait(wait: WaitRow): Promise<void> {
    this.#waits.set(`${wait.runId}\u0000${wait.waitId}`, { ...wait })
  }

  async getWaits(runId: string): Promise<WaitRow[]> {
    return [...this.#waits.values()].filter((wait) => wait.runId === runId).map((wait) => ({ ...wait }))
  }

  async clearRun(runId: string): Promise<void> {
    this.#timers.delete(runId)
    for (const [key, wait] of this.#waits) if (wait.runId === runId) this.#waits.delete(key)
  }

  async readyWaits(limit: number): Promise<WaitRow[]> {
    const free = [...this.#events.values()].filter((event) => event.takenBy === null)
    return [...this.#waits.values()].filter((wait) => free.some((event) => event.name === wait.name && event.match === wait.match)).slice(0, limit)
  }

  async putSchedule(row: ScheduleRow): Promise<boolean> {
    const existing = this.#schedules.get(row.id)
    if (existing) existing.body = row.body
    else this.#schedules.set(row.id, { ...row })
    return !existing
  }

  async getSchedule(id: string): Promise<ScheduleRow | undefined> {
    const row = this.#schedules.get(id)
    return row && { ...row }
  }

  async listSchedules(): Promise<ScheduleRow[]> {
    return [...this.#schedules.values()].sort((a, b) => a.id.localeCompare(b.id)).map((row) => ({ ...row }))
  }

  async deleteSchedule(id: string): Promise<boolean> {
    return this.#schedules.delete(id)
  }

  async setSchedulePaused(id: string, paused: boolean): Promise<boolean> {
    const row = this.#schedules.get(id)
    if (!row) return false
    row.paused = paused
    return true
  }

  async advanceSchedule(id: string, from: number, to: number): Promise<boolean> {
    const row = this.#schedules.get(id)
    if (!row || row.lastTick !== from) return false
    row.lastTick = to
    return true
  }

  async close(): Promise<void> {}
}
