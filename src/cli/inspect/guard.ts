import { timingSafeEqual } from 'node:crypto'
import type { Context as HonoContext, MiddlewareHandler } from 'hono'
import { getCookie, setCookie } from 'hono/cookie'

/**
 * The inspector's one policy for every request, in order: answer for 127.0.0.1 only (a DNS
 * rebinding attack arrives under another host name); trade the token of the printed URL for an
 * HttpOnly, SameSite=Strict cookie and send the browser on to the clean address, so the token
 * leaves the address bar and the history; then ask every request for the cookie (or the
 * `x-cairn-token` header a script sends), refuse a write that comes from another origin or is
 * not JSON, and put the security headers on every answer.
 */
export function guard(token: string, csp: string): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header('host') ?? ''
    if (!/^(127\.0\.0\.1|localhost)(:\d+)?$/.test(host)) return refuse(c, 403, 'cairn inspect answers on 127.0.0.1 only')
    const cookie = cookieName(host)
    const query = c.req.query('token')
    if (query !== undefined && c.req.method === 'GET' && c.req.path === '/') {
      if (!sameToken(query, token)) return refuse(c, 403, 'this URL needs the access token printed by `cairn inspect`')
      setCookie(c, cookie, token, { httpOnly: true, sameSite: 'Strict', path: '/' })
      secure(c, csp)
      return c.redirect('/', 302)
    }
    const given = c.req.header('x-cairn-token') ?? getCookie(c, cookie) ?? ''
    if (!sameToken(given, token)) return refuse(c, 403, 'open the URL printed by `cairn inspect` (it carries the access token) or send the token in the x-cairn-token header')
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      const crossSite = crossSiteReason(c, host)
      if (crossSite) return refuse(c, 403, crossSite)
      if (!/^application\/json\b/i.test(c.req.header('content-type') ?? '')) return refuse(c, 415, 'send the request body as JSON (content-type: application/json)')
    }
    await next()
    secure(c, csp)
  }
}

/** The security headers of every answer. */
export function secure(c: HonoContext, csp: string): void {
  c.header('content-security-policy', csp)
  c.header('x-frame-options', 'DENY')
  c.header('referrer-policy', 'no-referrer')
  c.header('x-content-type-options', 'nosniff')
  c.header('cross-origin-opener-policy', 'same-origin')
  c.header('cross-origin-resource-policy', 'same-origin')
  c.header('cache-control', 'no-store')
}

/** A refusal as JSON, with the security headers. */
export function refuse(c: HonoContext, status: 400 | 403 | 404 | 409 | 413 | 415 | 500, error: string): Response {
  c.header('content-security-policy', "default-src 'none'; frame-ancestors 'none'")
  c.header('x-frame-options', 'DENY')
  c.header('referrer-policy', 'no-referrer')
  c.header('x-content-type-options', 'nosniff')
  c.header('cache-control', 'no-store')
  return c.json({ error: `cairn inspect: ${error}` }, status)
}

/** Cookies do not tell ports apart: one name per port keeps two inspectors on one machine apart. */
function cookieName(host: string): string {
  return `cairn_inspect_${/:(\d+)$/.exec(host)?.[1] ?? '80'}`
}

/**
 * Why a write is refused as cross-site, or undefined. A browser names the page that sends a
 * request (`Origin`, `Sec-Fetch-Site`); a script with the token in a header names none.
 */
function crossSiteReason(c: HonoContext, host: string): string | undefined {
  const origin = c.req.header('origin')
  if (origin !== undefined && origin !== `http://${host}`) return `a write from another origin (${origin}) is refused`
  const site = c.req.header('sec-fetch-site')
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return `a ${site} write is refused`
  return undefined
}

function sameToken(given: string, token: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(token)
  return a.length === b.length && timingSafeEqual(a, b)
}
