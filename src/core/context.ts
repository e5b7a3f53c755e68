import type { Executor } from './executor';

/** What every concern module needs of the store it serves. */
export interface StoreContext {
	readonly db: Executor;
	readonly schema: string;
	/** The schema, quoted for SQL text. */
	readonly s: string;
	readonly maxPayloadBytes: number;
	readonly callbackQueue: string;
	/** StoreOptions.durableLeases. */
	readonly durableLeases: boolean;
}
