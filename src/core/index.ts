export * from './errors';
export * from './identifiers';
export * from './types';
export * from './dashboard';
export { JobStore, type ItemResults, type StoreOptions } from './store';
export {
	finishNoticesSent,
	FINISH_NOTICE_INTERVAL_MS,
	NOTICE_APPLICATION_NAME,
	NOTICE_CONNECTION_IDLE_MS,
	NOTICE_RECONNECT_DELAY_MS,
} from './finishNotices';
export type { CoalescingStats } from './coalescer';
export { parseTimestamptz } from './timestamps';
export { hashToken } from './tokens';
export {
	getPool,
	holdPool,
	closeAllPools,
	poolKey,
	toPoolConfig,
	cachedPoolCount,
	type ConnectionConfig,
	type SslMode,
} from './pool';
export {
	migrate,
	assertMigrated,
	loadMigrations,
	migrationScript,
	appliedMigrationIds,
} from './migrate';
export { openStore, resetMigrationCache, type StoreConfig, type StoreEvents } from './connect';
export { testConnection, type ConnectionTestResult } from './connectionTest';
export { COUNT_LIMITS, DEFAULT_MAX_PAYLOAD_BYTES, DURATION_LIMITS_MS } from './defaults';
export {
	canonicalJson,
	daysInMonth,
	fingerprint,
	integerInRange,
	MAX_KEY_LENGTH,
	optionalDate,
	optionalText,
	optionalUrl,
	validateCheckpoint,
	validateKey,
	validateUuid,
} from './validate';
export {
	ALSO_RETRY_STATUS_RANGE,
	classifyHttpStatus,
	retryAfterMs,
	type Classification,
} from './classify';
export {
	JobTriggerEngine,
	peekJob,
	release,
	DEFAULT_BACKSTOP_MS,
	DEFAULT_MAX_IN_FLIGHT,
	type EmitJobs,
	type JobTriggerCommonOptions,
	type JobTriggerOptions,
	type JobTriggerStats,
	type WakeReason,
	NotificationListener,
	type ListenerOptions,
	type TriggerLogger,
} from './trigger';
