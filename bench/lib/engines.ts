import type { Engine, EngineId } from './engine';
import { GraphileEngine } from './graphile';
import { OursEngine } from './ours';
import { PgBossEngine } from './pgboss';

/**
 * An engine with its default settings in a schema of its own: `prefix` for ours,
 * `<prefix>_pgboss` and `<prefix>_graphile` for the others (the side scripts' schemas, kept
 * apart from `npm run bench`'s).
 */
export function engineInSchemas(id: EngineId, url: string, prefix: string): Engine {
	switch (id) {
		case 'ours':
			return new OursEngine(url, prefix);
		case 'pgboss':
			return new PgBossEngine(url, `${prefix}_pgboss`);
		case 'graphile':
			return new GraphileEngine(url, `${prefix}_graphile`);
	}
}
