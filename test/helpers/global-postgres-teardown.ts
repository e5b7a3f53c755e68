import { teardown } from './global-postgres';

/** Stops the PostgreSQL that global-postgres.ts started (nothing when DATABASE_URL was set). */
export default teardown;
