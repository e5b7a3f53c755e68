/**
 * Job Status → the jobs dashboard operations: Dashboard Page (the page the bundled workflow
 * 10-dashboard.json serves), Queue Overview, List Jobs, Job Story and Dashboard Action (requeue
 * failed / cancel queued jobs). Thin glue over src/core/dashboard.ts; the page's files are built
 * from dashboard/ into dist/dashboard/.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	INodeProperties,
	INodePropertyOptions,
} from 'n8n-workflow';

import {
	DurableJobsError,
	integerInRange,
	optionalText,
	optionalUrl,
	type JobStore,
} from '../../src/core';
import { headerValue, isWebhookItem } from '../shared/batch';
import { lazyStore } from '../shared/connection';
import { errorItem, toNodeError } from '../shared/errors';

/** The request header every dashboard write must carry (a cross-site form cannot set one). */
export const ACTION_HEADER = 'X-Durable-Jobs-Action';

export const DASHBOARD_OPERATIONS = [
	'dashboardPage',
	'queueOverview',
	'listJobs',
	'jobStory',
	'dashboardAction',
] as const;
type DashboardOperation = (typeof DASHBOARD_OPERATIONS)[number];

export function isDashboardOperation(operation: string): operation is DashboardOperation {
	return (DASHBOARD_OPERATIONS as readonly string[]).includes(operation);
}

const dashboardOperationOptions: INodePropertyOptions[] = [
	{
		name: 'Dashboard Action',
		value: 'dashboardAction',
		action: 'Requeue or cancel jobs from the dashboard',
		description:
			'Requeue failed jobs or cancel queued jobs, as the dashboard asks (POST with the action header)',
	},
	{
		name: 'Dashboard Page',
		value: 'dashboardPage',
		action: 'Build the jobs dashboard page',
		description: 'The HTML page of the jobs dashboard, for a Respond to Webhook node',
	},
	{
		name: 'Job Story',
		value: 'jobStory',
		action: 'Get the whole story of a job',
		description: 'A job with every attempt, its result or error, and its callback deliveries',
	},
	{
		name: 'List Jobs',
		value: 'listJobs',
		action: 'List jobs newest first',
		description: 'Jobs filtered by queue, status, time and text, one page at a time',
	},
	{
		name: 'Queue Overview',
		value: 'queueOverview',
		action: 'Get the overview of every queue',
		description: 'Queue Stats for every queue plus jobs finished and failed per minute',
	},
];

/** The node's operation options with the dashboard's merged in, sorted by name as n8n lists them. */
export function withDashboardOperations(options: INodePropertyOptions[]): INodePropertyOptions[] {
	return [...options, ...dashboardOperationOptions].sort((a, b) => a.name.localeCompare(b.name));
}

const show = (...operations: DashboardOperation[]) => ({ show: { operation: operations } });

export const dashboardProperties: INodeProperties[] = [
	// Dashboard Page
	{
		displayName: 'Session Token',
		name: 'dashboardToken',
		type: 'string',
		typeOptions: { password: true },
		default: '={{ $json.token }}',
		required: true,
		displayOptions: show('dashboardPage'),
		description:
			'A JWT the page sends with each of its requests, signed by a JWT node (Sign) with the JWT Auth credential the JSON webhooks check. Give it a lifetime of a few hours.',
	},
	{
		displayName: 'Editor URL',
		name: 'editorUrl',
		type: 'string',
		default: '',
		placeholder: 'https://n8n.example.com',
		displayOptions: show('dashboardPage'),
		description:
			'Base URL of the n8n editor, where execution links point. Empty: the server the page is served from (right when the editor and the webhooks share a URL).',
	},
	{
		displayName: 'Refresh Seconds',
		name: 'refreshSeconds',
		type: 'number',
		typeOptions: { minValue: 2, maxValue: 3600 },
		default: 5,
		displayOptions: show('dashboardPage'),
	},
	{
		displayName: 'Attempts Added by Requeue',
		name: 'requeueAttempts',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 1000 },
		default: 3,
		displayOptions: show('dashboardPage'),
		description: 'Attempts a job requeued from the page gets on top of those it used',
	},
	// Queue Overview
	{
		displayName: 'Chart Since',
		name: 'chartSince',
		type: 'string',
		default: "={{ $json.query?.chart_since ?? '' }}",
		displayOptions: show('queueOverview'),
		description:
			'Only chart the minutes from this time on (ISO 8601); empty: the last 60 minutes. A refreshing page asks for the last minutes only.',
	},
	// List Jobs
	{
		displayName: 'Queue',
		name: 'listQueue',
		type: 'string',
		default: "={{ $json.query?.queue ?? '' }}",
		displayOptions: show('listJobs'),
		description: 'Empty: every queue',
	},
	{
		displayName: 'Status',
		name: 'listStatus',
		type: 'string',
		default: "={{ $json.query?.status ?? '' }}",
		displayOptions: show('listJobs'),
		description:
			'One of queued, running, done, failed, cancelled, or several separated by commas; empty: every status',
	},
	{
		displayName: 'Received From',
		name: 'listFrom',
		type: 'string',
		default: "={{ $json.query?.from ?? '' }}",
		displayOptions: show('listJobs'),
		description: 'Jobs received at or after this time (ISO 8601)',
	},
	{
		displayName: 'Received Before',
		name: 'listTo',
		type: 'string',
		default: "={{ $json.query?.to ?? '' }}",
		displayOptions: show('listJobs'),
		description: 'Jobs received before this time (ISO 8601)',
	},
	{
		displayName: 'Search Text',
		name: 'listText',
		type: 'string',
		default: "={{ $json.query?.text ?? '' }}",
		displayOptions: show('listJobs'),
		description: 'Exact job ID, idempotency key or correlation ID',
	},
	{
		displayName: 'Cursor',
		name: 'listCursor',
		type: 'string',
		default: "={{ $json.query?.cursor ?? '' }}",
		displayOptions: show('listJobs'),
		description: 'The next_cursor of the previous page; empty: the newest page',
	},
	{
		displayName: 'Page Size',
		name: 'listLimit',
		type: 'string',
		default: "={{ $json.query?.limit ?? '50' }}",
		displayOptions: show('listJobs'),
		description: 'Jobs per page, 1 to 1000',
	},
	// Job Story
	{
		displayName: 'Job ID',
		name: 'storyJobId',
		type: 'string',
		default: "={{ $json.query?.job_id ?? $json.job_id ?? '' }}",
		required: true,
		displayOptions: show('jobStory'),
	},
	{
		displayName: 'Preview Characters',
		name: 'previewChars',
		type: 'number',
		typeOptions: { minValue: 100, maxValue: 1000000 },
		default: 2000,
		displayOptions: show('jobStory'),
		description: 'The payload and the result are cut to this many characters',
	},
	{
		displayName: 'Callback Queue',
		name: 'callbackQueue',
		type: 'string',
		default: 'callbacks',
		displayOptions: show('jobStory'),
		description: 'The queue Job Complete writes job-finished callback events to',
	},
	// Dashboard Action
	{
		displayName: 'Action',
		name: 'dashboardAction',
		type: 'string',
		default: "={{ $json.body?.action ?? '' }}",
		required: true,
		displayOptions: show('dashboardAction'),
		description: 'The action: requeue (failed jobs) or cancel (queued jobs)',
	},
	{
		displayName: 'Job IDs',
		name: 'actionJobIds',
		type: 'string',
		default: '={{ $json.body?.job_ids }}',
		required: true,
		displayOptions: show('dashboardAction'),
		description: 'An array of job IDs (or comma-separated), at most 1000',
	},
	{
		displayName: 'As Of',
		name: 'actionAsOf',
		type: 'string',
		default: "={{ $json.body?.as_of ?? '' }}",
		displayOptions: show('dashboardAction'),
		description:
			'Requeue: the as_of of the list or story the jobs were picked from. Only jobs that failed before it are requeued, so a repeated request changes nothing.',
	},
	{
		displayName: 'Additional Attempts',
		name: 'actionAttempts',
		type: 'string',
		default: '={{ $json.body?.additional_attempts ?? 3 }}',
		displayOptions: show('dashboardAction'),
		description: 'Requeue: attempts a job gets on top of those it used (1 to 1000)',
	},
	{
		displayName: 'Require Action Header',
		name: 'requireActionHeader',
		type: 'boolean',
		default: true,
		displayOptions: show('dashboardAction'),
		description: `Whether the input must be a webhook request carrying the header ${ACTION_HEADER} with the action's name. A browser sends a custom header only after a CORS preflight, so a form or link on another site cannot trigger the action.`,
	},
];

// ------------------------------------------------------------------------------------ the page

interface DashboardAssets {
	html: string;
	css: string;
	script: string;
}

let cachedAssets: DashboardAssets | undefined;

/** The page's files, built into dist/dashboard (next to dist/nodes) by `npm run build`. */
function loadDashboardAssets(): DashboardAssets {
	if (cachedAssets) return cachedAssets;
	const candidates = [
		join(__dirname, '..', '..', 'dashboard'),
		join(__dirname, '..', '..', 'dist', 'dashboard'),
	];
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

export interface DashboardPageConfig {
	token: string;
	apiPath: string;
	editorUrl: string;
	refreshSeconds: number;
	additionalAttempts: number;
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

// ------------------------------------------------------------------------------------ execute

function actionHeaderError(action: string): DurableJobsError {
	return new DurableJobsError(
		'action_header_missing',
		`Dashboard actions need the request header ${ACTION_HEADER}: ${action || '<action>'}`,
		{
			field: ACTION_HEADER,
			fix: `Send the request as the dashboard does: POST with the header ${ACTION_HEADER} set to the action's name`,
			httpStatus: 403,
		},
	);
}

async function runOperation(
	context: IExecuteFunctions,
	operation: DashboardOperation,
	itemIndex: number,
	item: INodeExecutionData,
	store: () => Promise<JobStore>,
	storyStore: () => Promise<JobStore>,
): Promise<IDataObject> {
	const parameter = <T>(name: string, fallback?: T) =>
		context.getNodeParameter(name, itemIndex, fallback) as T;
	switch (operation) {
		case 'dashboardPage': {
			const token = optionalText(parameter<string>('dashboardToken', ''), 'dashboardToken', 8192);
			if (token === null) {
				throw new DurableJobsError('invalid_input', 'Session Token is empty', {
					field: 'dashboardToken',
					fix: 'Put a JWT node (operation Sign, the JWT Auth credential of the JSON webhooks) before Dashboard Page; Session Token reads its {{ $json.token }}',
					httpStatus: 500,
				});
			}
			const html = renderDashboardPage({
				token,
				apiPath: '',
				editorUrl: optionalUrl(parameter<string>('editorUrl', ''), 'editorUrl') ?? '',
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
			});
			return { html };
		}
		case 'queueOverview':
			return (await (
				await store()
			).queueOverview({
				chartSince: parameter<string>('chartSince', ''),
			})) as unknown as IDataObject;
		case 'listJobs':
			return (await (
				await store()
			).listJobs({
				queue: parameter<string>('listQueue', ''),
				status: parameter<string>('listStatus', ''),
				from: parameter<string>('listFrom', ''),
				to: parameter<string>('listTo', ''),
				text: parameter<string>('listText', ''),
				cursor: parameter<string>('listCursor', ''),
				limit: parameter<string>('listLimit', ''),
			})) as unknown as IDataObject;
		case 'jobStory': {
			const jobId = parameter<string>('storyJobId', '');
			const story = await (
				await storyStore()
			).jobStory(jobId, { previewChars: parameter<number>('previewChars', 2000) });
			return story
				? ({ found: true, ...story } as unknown as IDataObject)
				: { found: false, job_id: String(jobId) };
		}
		case 'dashboardAction': {
			const action = String(parameter<string>('dashboardAction', '') ?? '').trim();
			if (parameter<boolean>('requireActionHeader', true)) {
				const sent = isWebhookItem(item.json) ? headerValue(item.json, ACTION_HEADER) : undefined;
				if (
					sent === undefined ||
					sent.trim().toLowerCase() !== action.toLowerCase() ||
					action === ''
				)
					throw actionHeaderError(action);
			}
			const jobIds = parameter<unknown>('actionJobIds');
			if (action === 'requeue') {
				return (await (
					await store()
				).requeueFailedJobs({
					jobIds,
					asOf: parameter<string>('actionAsOf', ''),
					additionalAttempts: integerInRange(
						parameter('actionAttempts', 3),
						'additional_attempts',
						1,
						1000,
						3,
					),
				})) as unknown as IDataObject;
			}
			if (action === 'cancel') {
				return (await (await store()).cancelQueuedJobs({ jobIds })) as unknown as IDataObject;
			}
			throw new DurableJobsError(
				'invalid_input',
				`action: "${action.slice(0, 40)}" is not a dashboard action`,
				{
					field: 'action',
					fix: 'Use requeue (failed jobs) or cancel (queued jobs)',
					httpStatus: 400,
				},
			);
		}
	}
}

/** Runs a dashboard operation for every input item (a webhook request is one item). */
export async function executeDashboardOperation(
	context: IExecuteFunctions,
	operation: DashboardOperation,
): Promise<INodeExecutionData[][]> {
	const store = lazyStore(context);
	const storyStore =
		operation === 'jobStory'
			? lazyStore(context, {
					callbackQueue: (context.getNodeParameter('callbackQueue', 0, '') as string) || undefined,
				})
			: store;
	const output: INodeExecutionData[] = [];
	const items = context.getInputData();
	for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
		try {
			const json = await runOperation(
				context,
				operation,
				itemIndex,
				items[itemIndex],
				store,
				storyStore,
			);
			output.push({ json, pairedItem: { item: itemIndex } });
		} catch (error) {
			if (!context.continueOnFail()) throw toNodeError(context.getNode(), error, itemIndex);
			output.push(errorItem(context.getNode(), error, itemIndex));
		}
	}
	return [output];
}
