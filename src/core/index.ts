export { decodeValue, deserialize, encodeValue, isPlainObject, parseJson, serialize, TAG, type DecodeContext, type JsonObject, type JsonValue } from './codec.js'
export {
  CairnError,
  CheckpointCorruptionError,
  CheckpointIntegrityError,
  CheckpointError,
  CheckpointNotFoundError,
  ConfigMismatchError,
  EffectStartedError,
  RunBusyError,
  SchemaVersionError,
  StoreError,
  isStoreOutage,
  type CairnErrorCode,
  type CairnErrorOptions,
  type CheckpointErrorOptions,
} from './errors.js'
export { configureLimits, DEFAULT_LIMITS, limits, MAX_DEPTH_CEILING, type CairnLimits } from './limits.js'
export { canonicalJson, hashValue, sha256 } from './hash.js'
export { idTimestamp, newId } from './ids.js'
export { defaultSchemas, SchemaRegistry, type Migration, type UpgradeInput } from './schema.js'
export { freezeDeep, isDeepFrozen } from './freeze.js'
