import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { IExecuteFunctions, INodeExecutionData, INodeProperties } from 'n8n-workflow';

import { DurableJobsError, integerInRange, optionalText, optionalUrl } from '../../../../src/core';
import { runEach } from '../../../shared/batch';
import { withDisplayOptions } from '../../../shared/operations';

const properties: INodeProperties[] = [
	{
		displayName: 'Session Token',
		name: 'dashboardToken',
		type: 'string',
		typeOptions: { password: true },
		default: '={{ $json.token }}',
		required: true,
		description:
			'A JWT the page sends with each of its requests, signed by a JWT node (Sign) with the JWT Auth credential the JSON webhooks check. Give it a lifetime of a few hours.',
	},
	{
		displayName: 'Editor URL',
		name: 'editorUrl',
		type: 'string',
		default: '',
		placeholder: 'https://n8n.example.com',
		description:
			'Base URL of the n8n editor, where execution links point. Empty: the server the page is served from (right when the editor and the webhooks share a URL).',
	},
	{
		displayName: 'Refresh Seconds',
		name: 'refreshSeconds',
		type: 'number',
		typeOptions: { minValue: 2, maxValue: 3600 },
		default: 5,
	},
	{
		displayName: 'Attempts Added by Requeue',
		name: 'requeueAttempts',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 1000 },
		default: 3,
		description: 'Attempts a job requeued from the page gets on top of those it used',
	},
];

export const description = withDisplayOptions(
	{ show: { operation: ['dashboardPage'] } },
	properties,
);

interface DashboardAssets {
	html: string;
	css: string;
	script: string;
}

export interface DashboardPageConfig {
	token: string;
	apiPath: string;
	editorUrl: string;
	refreshSeconds: number;
	additionalAttempts: number;
}

let cachedAssets: DashboardAssets | undefined;

/**
 * The page's files, built from dashboard/ into dist/dashboard (next to dist/nodes) by
 * `npm run build`: found from the compiled node in dist/, or from the source tree after a build.
 */
function loadDashboardAssets(): DashboardAssets {
	if (cachedAssets) return cachedAssets;
	// The folder that holds nodes/: dist/ once compiled, the source tree when run by ts-jest.
	const root = join(__dirname, '..', '..', '..', '..');
	const candidates = [join(root, 'dashboard'), join(root, 'dist', 'dashboard')];
	const dir = candidates.find((candidate) => existsSync(join(candidate, 'dashboard.js')));
	if (!dir) {
		throw new DurableJobsError(
			'dashboard_missing',
			'The dashboard page files are missing from the package',
			{
				fix: 'Reinstall n8n-nodes-durable-jobs (from source: npm run build)',
				httpStatus: 500,
			},
		);
	}
	cachedAssets = {
		html: readFileSync(join(dir, 'index.html'), 'utf8'),
		css: readFileSync(join(dir, 'dashboard.css'), 'utf8'),
		script: readFileSync(join(dir, 'dashboard.js'), 'utf8'),
	};
	return cachedAssets;
}

/** JSON that is safe inside a <script> element: no `<`, `>` or `&`, no line separators. */
function scriptJson(value: unknown): string {
	return JSON.stringify(value)
		.replace(/</g, '\\u003c')
		.replace(/>/g, '\\u003e')
		.replace(/&/g, '\\u0026')
		.replace(/\u2028/g, '\\u2028')
		.replace(/\u2029/g, '\\u2029');
}

/** The page: the HTML template with the CSS, the script and the config put in their places. */
export function renderDashboardPage(
	config: DashboardPageConfig,
	assets: DashboardAssets = loadDashboardAssets(),
): string {
	const fill = (template: string, marker: string, content: string) => {
		const at = template.indexOf(marker);
		if (at < 0) throw new Error(`The dashboard template has no ${marker}`);
		return template.slice(0, at) + content + template.slice(at + marker.length);
	};
	if (/<\/(script|style)/i.test(assets.script + assets.css))
		throw new Error('The dashboard script or style closes its element');
	let page = fill(assets.html, '/*__DJ_CSS__*/', assets.css);
	page = fill(page, '__DJ_CONFIG__', scriptJson(config));
	return fill(page, '/*__DJ_SCRIPT__*/', assets.script);
}

/**
 * The HTML page of the jobs dashboard, one per item, for a Respond to Webhook node (the bundled
 * workflow 10-dashboard.json). Its files are inlined, so the page is one answer; it needs no
 * database.
 */
export async function execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	return await runEach(this, {
		read: (itemIndex): DashboardPageConfig => {
			const parameter = (name: string, fallback: unknown) =>
				this.getNodeParameter(name, itemIndex, fallback);
			const token = optionalText(parameter('dashboardToken', ''), 'dashboardToken', 8192);
			if (token === null) {
				throw new DurableJobsError('invalid_input', 'Session Token is empty', {
					field: 'dashboardToken',
					fix: 'Put a JWT node (operation Sign, the JWT Auth credential of the JSON webhooks) before Dashboard Page; Session Token reads its {{ $json.token }}',
					httpStatus: 500,
				});
			}
			return {
				token,
				apiPath: '',
				editorUrl: optionalUrl(parameter('editorUrl', ''), 'editorUrl') ?? '',
				refreshSeconds: integerInRange(
					parameter('refreshSeconds', 5),
					'refreshSeconds',
					2,
					3600,
					5,
				),
				additionalAttempts: integerInRange(
					parameter('requeueAttempts', 3),
					'requeueAttempts',
					1,
					1000,
					3,
				),
			};
		},
		call: async (config) => renderDashboardPage(config),
		json: (html) => ({ html }),
	});
}
