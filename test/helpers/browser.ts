/**
 * Headless Chromium for the browser tests: the machine's own Chromium (Debian's `chromium`
 * package, or CHROMIUM_PATH), driven by playwright-core. Nothing is downloaded at run time.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chromium, type BrowserContext } from 'playwright-core';

const CANDIDATES = [
	process.env.CHROMIUM_PATH,
	'/usr/bin/chromium',
	'/usr/bin/chromium-browser',
	'/usr/bin/google-chrome',
].filter((path): path is string => typeof path === 'string' && path !== '');

/** The Chromium executable, or null when this machine has none. */
export function chromiumPath(): string | null {
	return CANDIDATES.find((path) => existsSync(path)) ?? null;
}

export const CHROMIUM_MISSING_MESSAGE =
	'Chromium not found (looked for CHROMIUM_PATH, /usr/bin/chromium, /usr/bin/chromium-browser, /usr/bin/google-chrome): ' +
	'the browser tests of the jobs dashboard are SKIPPED. Install it with `apt-get install -y chromium` (Debian/Ubuntu) ' +
	'or point CHROMIUM_PATH at a Chromium or Chrome executable.';

const FLAGS = [
	'--headless',
	'--no-sandbox',
	'--disable-gpu',
	'--disable-quic',
	'--no-first-run',
	'--disable-background-networking',
	'--disable-component-update',
	'--disable-sync',
];

export interface Browser {
	context: BrowserContext;
	close(): Promise<void>;
}

/** A fresh browser profile (its own user data dir, removed on close). */
export async function launchBrowser(
	options: {
		httpCredentials?: { username: string; password: string; origin?: string };
		viewport?: { width: number; height: number };
	} = {},
): Promise<Browser> {
	const executablePath = chromiumPath();
	if (!executablePath) throw new Error(CHROMIUM_MISSING_MESSAGE);
	const userDataDir = mkdtempSync(join(tmpdir(), 'dj-chromium-'));
	const context = await chromium.launchPersistentContext(userDataDir, {
		executablePath,
		headless: true,
		args: FLAGS,
		viewport: options.viewport ?? { width: 1440, height: 900 },
		httpCredentials: options.httpCredentials,
	});
	return {
		context,
		close: async () => {
			await context.close().catch(() => undefined);
			rmSync(userDataDir, { recursive: true, force: true });
		},
	};
}
