import type { Executor } from './executor';
import type { PayloadLimit } from './validate';

/** What every concern module needs of the store it serves. */
export interface StoreContext {
	readonly db: Executor;
	readonly schema: string;
	/** The schema, quoted for SQL text. */
	readonly s: string;
	/** StoreOptions.maxPayloadBytes and payloadLimitSetting, their defaults filled in. */
	readonly payloadLimit: PayloadLimit;
	readonly callbackQueue: string;
	/** StoreOptions.durableLeases. */
	readonly durableLeases: boolean;
}
