/*
 * The jobs dashboard's script. n8n serves the page from a webhook, with a sandbox
 * Content-Security-Policy: the page has an opaque origin, so it has no cookies or storage and
 * its requests to the JSON endpoints are cross-origin. It authenticates them with the session
 * token the page was served with (a short-lived JWT), sent as a Bearer header; nothing rides on
 * ambient browser credentials.
 *
 * Everything that comes from the server (keys, payloads, error messages) is hostile input: it
 * is put into the page as text nodes or textContent only, never parsed as HTML.
 */

interface PageConfig {
	token: string;
	/** Path of the JSON endpoints; empty: `<this page's path>/api`. */
	apiPath: string;
	/** Base URL of the n8n editor for execution links; empty: this origin. */
	editorUrl: string;
	refreshSeconds: number;
	/** Attempts a requeued job gets on top of those it used (for the confirmation text). */
	additionalAttempts: number;
}

// The JSON the endpoints answer, as the core defines it. `import('…')` types keep this file a
// plain script (an import statement would make it a module), which the page inlines.
type QueueOverview = import('../src/core/dashboard/contract').QueueOverview;
type JobListPage = import('../src/core/dashboard/contract').JobListPage;
type AttemptStory = import('../src/core/dashboard/contract').AttemptStory;
type TextPreview = import('../src/core/dashboard/contract').TextPreview;
type JobStory = import('../src/core/dashboard/contract').JobStory;
type ActionResult = import('../src/core/dashboard/contract').DashboardActionResult;

const STATUSES = ['queued', 'running', 'done', 'failed', 'cancelled'];
const CHART_MINUTES = 60;

class SessionEnded extends Error {}

class ApiError extends Error {
	constructor(
		readonly status: number,
		message: string,
	) {
		super(message);
	}
}

// ------------------------------------------------------------------------------------ DOM helpers

type Child = Node | string | number | null | undefined | false;

/** An element with text children: strings become text nodes, never markup. */
function h<K extends keyof HTMLElementTagNameMap>(
	tag: K,
	props: { className?: string; title?: string; colSpan?: number } = {},
	...children: Child[]
): HTMLElementTagNameMap[K] {
	const element = document.createElement(tag);
	if (props.className) element.className = props.className;
	if (props.title !== undefined) element.title = props.title;
	if (props.colSpan !== undefined && element instanceof HTMLTableCellElement)
		element.colSpan = props.colSpan;
	for (const child of children) {
		if (child === null || child === undefined || child === false) continue;
		element.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
	}
	return element;
}

function byId<T extends HTMLElement>(id: string): T {
	const element = document.getElementById(id);
	if (!element) throw new Error(`#${id} missing`);
	return element as T;
}

function svg<K extends keyof SVGElementTagNameMap>(
	tag: K,
	attributes: Record<string, string | number>,
): SVGElementTagNameMap[K] {
	const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
	for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
	return element;
}

function pad(value: number): string {
	return String(value).padStart(2, '0');
}

/** Local time, to the second; the full UTC time is in the tooltip. */
function formatTime(iso: string | null): string {
	if (!iso) return '—';
	const date = new Date(iso);
	if (Number.isNaN(date.getTime())) return iso;
	return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function timeCell(iso: string | null): HTMLTableCellElement {
	return h('td', { title: iso ?? '' }, formatTime(iso));
}

function formatAge(seconds: number | null): string {
	if (seconds === null) return '—';
	if (seconds < 60) return `${Math.round(seconds)} s`;
	if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
	if (seconds < 86400)
		return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
	return `${Math.floor(seconds / 86400)} d ${Math.floor((seconds % 86400) / 3600)} h`;
}

function countCell(value: number, warnWhenPositive = false): HTMLTableCellElement {
	const className = value === 0 ? 'num zero' : warnWhenPositive ? 'num warn' : 'num';
	return h('td', { className }, value.toLocaleString('en-US'));
}

function badge(status: string): HTMLSpanElement {
	// The class comes from a fixed list, never from the data.
	return h('span', { className: STATUSES.includes(status) ? `badge ${status}` : 'badge' }, status);
}

// ------------------------------------------------------------------------------------ the page

function main(): void {
	if (window.top !== window.self) {
		// Never shown inside another site's frame (the server also sends X-Frame-Options: DENY).
		document.body.replaceChildren(h('p', {}, 'The jobs dashboard cannot be shown in a frame.'));
		return;
	}
	const configText = document.getElementById('dj-config')?.textContent ?? '{}';
	const config = JSON.parse(configText) as PageConfig;
	const apiBase = config.apiPath || `${location.pathname.replace(/\/+$/, '')}/api`;
	const refreshMs = Math.max(2, Number(config.refreshSeconds) || 5) * 1000;

	const state = {
		filter: { queue: '', status: '', from: '', to: '', text: '' },
		/** Cursor of each page visited, page 0 first (''). */
		cursors: [''] as string[],
		page: null as JobListPage | null,
		selected: null as string | null,
		story: null as JobStory | null,
		overview: null as QueueOverview | null,
		/** Chart values per queue and minute (epoch ms). */
		chart: new Map<string, Map<number, { done: number; failed: number }>>(),
		chartTo: 0,
		refreshing: false,
		ended: false,
		lastRefresh: 0,
		/** Numbers of the latest list / story / overview request: an older answer that arrives late is dropped. */
		requests: { jobs: 0, story: 0, overview: 0 },
	};

	// ---------------------------------------------------------------- API

	async function api<T>(
		path: string,
		query: Record<string, string> = {},
		action?: { name: string; body: unknown },
	): Promise<T> {
		const url = new URL(`${apiBase}/${path}`, location.href);
		for (const [key, value] of Object.entries(query))
			if (value !== '') url.searchParams.set(key, value);
		const headers: Record<string, string> = {
			Authorization: `Bearer ${config.token}`,
			Accept: 'application/json',
		};
		if (action) {
			headers['Content-Type'] = 'application/json';
			headers['X-Durable-Jobs-Action'] = action.name;
		}
		const response = await fetch(url.toString(), {
			method: action ? 'POST' : 'GET',
			headers,
			body: action ? JSON.stringify(action.body) : undefined,
			credentials: 'omit',
			cache: 'no-store',
		});
		const text = await response.text();
		let data: unknown = null;
		try {
			data = JSON.parse(text);
		} catch {
			data = null;
		}
		if (response.status === 401 || (response.status === 403 && data === null))
			throw new SessionEnded();
		if (!response.ok) {
			const problem = (data ?? {}) as { detail?: unknown; error?: unknown; title?: unknown };
			const message = [problem.title, problem.detail ?? problem.error].filter(
				(part) => typeof part === 'string',
			);
			throw new ApiError(response.status, message.join(': ') || `HTTP ${response.status}`);
		}
		return data as T;
	}

	function endSession(): void {
		if (state.ended) return;
		state.ended = true;
		const banner = byId<HTMLDivElement>('banner');
		const reload = h('button', { className: 'primary' }, 'Reload');
		reload.addEventListener('click', () => location.reload());
		banner.replaceChildren(
			h(
				'span',
				{},
				'The dashboard session has ended (it lasts a few hours). Reload the page to sign in again.',
			),
			reload,
		);
		banner.hidden = false;
		byId('refresh-state').textContent = 'Session ended';
	}

	let noticeTimer = 0;
	function notify(message: string, isError = false): void {
		const notice = byId<HTMLDivElement>('notice');
		notice.textContent = message;
		notice.className = isError ? 'notice error' : 'notice';
		notice.hidden = false;
		window.clearTimeout(noticeTimer);
		noticeTimer = window.setTimeout(() => {
			notice.hidden = true;
		}, 15_000);
	}

	async function guarded(work: () => Promise<void>): Promise<void> {
		try {
			await work();
		} catch (error) {
			if (error instanceof SessionEnded) endSession();
			else notify(error instanceof Error ? error.message : String(error), true);
		}
	}

	// ---------------------------------------------------------------- queues

	function mergeChart(overview: QueueOverview): void {
		const since = Date.parse(overview.chart.since);
		const from = Date.parse(overview.chart.from_minute);
		state.chartTo = Date.parse(overview.chart.to_minute);
		for (const minutes of state.chart.values()) {
			for (const minute of [...minutes.keys()])
				if (minute >= since || minute < from) minutes.delete(minute);
		}
		for (const series of overview.chart.series) {
			const minutes =
				state.chart.get(series.queue) ?? new Map<number, { done: number; failed: number }>();
			for (const point of series.points)
				minutes.set(Date.parse(point.minute), { done: point.done, failed: point.failed });
			state.chart.set(series.queue, minutes);
		}
	}

	function chartFor(queue: string): SVGSVGElement {
		const width = CHART_MINUTES * 4;
		const height = 36;
		const minutes = state.chart.get(queue) ?? new Map<number, { done: number; failed: number }>();
		const first = state.chartTo - (CHART_MINUTES - 1) * 60_000;
		let max = 0;
		for (let i = 0; i < CHART_MINUTES; i++) {
			const value = minutes.get(first + i * 60_000);
			if (value) max = Math.max(max, value.done + value.failed);
		}
		const chart = svg('svg', {
			class: 'chart',
			width,
			height: height + 10,
			viewBox: `0 0 ${width} ${height + 10}`,
			role: 'img',
		});
		const label = svg('title', {});
		let doneTotal = 0;
		let failedTotal = 0;
		chart.append(
			label,
			svg('line', { class: 'axis', x1: 0, y1: height + 0.5, x2: width, y2: height + 0.5 }),
		);
		for (let i = 0; i < CHART_MINUTES; i++) {
			const minute = first + i * 60_000;
			const value = minutes.get(minute);
			if (!value || max === 0) continue;
			doneTotal += value.done;
			failedTotal += value.failed;
			const doneHeight = (value.done / max) * height;
			const failedHeight = (value.failed / max) * height;
			const bar = (className: string, y: number, barHeight: number) => {
				const rect = svg('rect', {
					class: className,
					x: i * 4,
					y,
					width: 3,
					height: Math.max(barHeight, 1),
				});
				const tip = svg('title', {});
				tip.textContent = `${formatTime(new Date(minute).toISOString())}: ${value.done} done, ${value.failed} failed`;
				rect.append(tip);
				return rect;
			};
			if (value.done > 0) chart.append(bar('done', height - doneHeight, doneHeight));
			if (value.failed > 0)
				chart.append(bar('failed', height - doneHeight - failedHeight, failedHeight));
		}
		label.textContent = `Last 60 minutes: ${doneTotal} done, ${failedTotal} failed (peak ${max} per minute)`;
		chart.setAttribute('aria-label', label.textContent);
		chart.setAttribute('data-done', String(doneTotal));
		chart.setAttribute('data-failed', String(failedTotal));
		const peak = svg('text', { x: width, y: height + 9, 'text-anchor': 'end' });
		peak.textContent = max > 0 ? `peak ${max}/min` : 'no finished jobs';
		const start = svg('text', { x: 0, y: height + 9 });
		start.textContent = '−60 min';
		chart.append(start, peak);
		return chart;
	}

	function renderQueues(overview: QueueOverview): void {
		const body = byId<HTMLTableSectionElement>('queues-body');
		if (overview.queues.length === 0) {
			body.replaceChildren(
				h('tr', {}, h('td', { className: 'empty', colSpan: 11 }, 'No jobs yet.')),
			);
		} else {
			body.replaceChildren(
				...overview.queues.map((queue) => {
					const open = h(
						'button',
						{ className: 'link', title: 'Show the jobs of this queue' },
						queue.queue,
					);
					open.addEventListener('click', () => {
						state.filter.queue = queue.queue;
						byId<HTMLSelectElement>('f-queue').value = queue.queue;
						void guarded(() => loadJobs(true));
					});
					const row = h(
						'tr',
						{},
						h('td', {}, open),
						countCell(queue.ready),
						countCell(queue.scheduled),
						countCell(queue.retrying),
						countCell(queue.running),
						countCell(queue.running_expired, true),
						countCell(queue.done),
						countCell(queue.failed, true),
						countCell(queue.cancelled),
						h(
							'td',
							{
								className: 'num',
								title: `Oldest queued: ${formatAge(queue.oldest_queued_age_seconds)}`,
							},
							formatAge(queue.oldest_ready_age_seconds),
						),
						h('td', {}, chartFor(queue.queue)),
					);
					row.dataset.queue = queue.queue;
					return row;
				}),
			);
		}
		const select = byId<HTMLSelectElement>('f-queue');
		const known = new Set([...select.options].map((option) => option.value));
		for (const queue of overview.queues) {
			if (known.has(queue.queue)) continue;
			const option = h('option', {}, queue.queue);
			option.value = queue.queue;
			select.append(option);
		}
	}

	async function loadOverview(): Promise<void> {
		const since = state.chartTo > 0 ? new Date(state.chartTo - 60_000).toISOString() : '';
		const request = ++state.requests.overview;
		const overview = await api<QueueOverview>('overview', { chart_since: since });
		if (request !== state.requests.overview) return;
		state.overview = overview;
		mergeChart(overview);
		renderQueues(overview);
	}

	// ---------------------------------------------------------------- jobs

	function filterQuery(): {
		queue: string;
		status: string;
		from: string;
		to: string;
		text: string;
	} {
		const toIso = (local: string) => (local ? new Date(local).toISOString() : '');
		return {
			queue: state.filter.queue,
			status: state.filter.status,
			from: toIso(state.filter.from),
			to: toIso(state.filter.to),
			text: state.filter.text.trim(),
		};
	}

	function renderJobs(page: JobListPage): void {
		const body = byId<HTMLTableSectionElement>('jobs-body');
		if (page.jobs.length === 0) {
			body.replaceChildren(
				h('tr', {}, h('td', { className: 'empty', colSpan: 7 }, 'No jobs match this filter.')),
			);
		} else {
			body.replaceChildren(
				...page.jobs.map((job) => {
					const open = h(
						'button',
						{ className: 'link mono', title: job.job_id },
						job.job_id.slice(0, 8) + '…',
					);
					open.addEventListener('click', () => selectJob(job.job_id));
					const status = h('td', {}, badge(job.status));
					if (job.lease_expired)
						status.append(' ', h('span', { className: 'warn' }, 'lease expired'));
					const error =
						job.error_code || job.error_message
							? [job.error_code, job.error_class ? `(${job.error_class})` : null, job.error_message]
									.filter(Boolean)
									.join(' ')
							: '';
					const keys = h(
						'td',
						{ className: 'keys mono' },
						h(
							'span',
							{ title: `Idempotency key: ${job.idempotency_key ?? '—'}` },
							job.idempotency_key ?? '—',
						),
						h(
							'span',
							{ className: 'muted', title: `Correlation id: ${job.correlation_id ?? '—'}` },
							job.correlation_id ?? '—',
						),
					);
					const row = h(
						'tr',
						{ className: job.job_id === state.selected ? 'selected' : '' },
						timeCell(job.created_at),
						h('td', {}, open),
						h('td', {}, job.queue),
						status,
						h('td', { className: 'num' }, `${job.attempts} / ${job.max_attempts}`),
						keys,
						h('td', { className: 'wrap', title: error }, h('span', { className: 'clamp' }, error)),
					);
					row.dataset.jobId = job.job_id;
					return row;
				}),
			);
		}
		const pageIndex = state.cursors.length - 1;
		byId('page-info').textContent = `Page ${pageIndex + 1} · ${page.jobs.length} jobs`;
		byId<HTMLButtonElement>('page-prev').disabled = pageIndex === 0;
		byId<HTMLButtonElement>('page-newest').disabled = pageIndex === 0;
		byId<HTMLButtonElement>('page-next').disabled = page.next_cursor === null;
	}

	async function loadJobs(reset = false): Promise<void> {
		if (reset) state.cursors = [''];
		const cursor = state.cursors[state.cursors.length - 1];
		const request = ++state.requests.jobs;
		const page = await api<JobListPage>('jobs', { ...filterQuery(), cursor, limit: '50' });
		if (request !== state.requests.jobs) return;
		state.page = page;
		renderJobs(page);
	}

	// ---------------------------------------------------------------- one job

	function executionLink(path: string | null, executionId: string | null): Node | string {
		if (!path || !path.startsWith('/workflow/') || !executionId) return executionId ?? '—';
		const link = h('a', { title: 'Open this execution in the n8n editor' }, `#${executionId}`);
		link.href = `${config.editorUrl.replace(/\/+$/, '')}${path}`;
		link.target = '_blank';
		link.rel = 'noopener noreferrer';
		return link;
	}

	function facts(entries: Array<[string, Child]>): HTMLDListElement {
		const list = h('dl', { className: 'facts' });
		for (const [term, value] of entries) list.append(h('dt', {}, term), h('dd', {}, value ?? '—'));
		return list;
	}

	function textBlock(label: string, text: TextPreview, open = false): HTMLDetailsElement {
		const details = h(
			'details',
			{},
			h(
				'summary',
				{},
				text.truncated
					? `${label} (${text.chars.toLocaleString('en-US')} characters, first ${text.preview.length.toLocaleString('en-US')} shown)`
					: `${label} (${text.chars.toLocaleString('en-US')} characters)`,
			),
			h('pre', {}, text.preview + (text.truncated ? '\n…' : '')),
		);
		details.open = open;
		return details;
	}

	function attemptsTable(attempts: AttemptStory[], withCheckpoint: boolean): HTMLElement {
		if (attempts.length === 0) return h('p', { className: 'muted' }, 'None yet.');
		return h(
			'div',
			{ className: 'table-wrap' },
			h(
				'table',
				{ className: 'attempts' },
				h(
					'thead',
					{},
					h(
						'tr',
						{},
						h('th', {}, '#'),
						h('th', {}, 'Outcome'),
						h('th', {}, 'n8n execution'),
						h('th', {}, 'Started'),
						h('th', {}, 'Finished'),
						withCheckpoint && h('th', {}, 'Checkpoint'),
						h('th', {}, 'Error'),
						h('th', {}, 'Lease until'),
						h('th', {}, 'Attempt id'),
					),
				),
				h(
					'tbody',
					{},
					...attempts.map((attempt) =>
						h(
							'tr',
							{},
							h('td', { className: 'num' }, attempt.attempt),
							h('td', {}, attempt.outcome ?? 'unknown'),
							h('td', {}, executionLink(attempt.execution_path, attempt.execution_id)),
							timeCell(attempt.started_at),
							timeCell(attempt.finished_at),
							withCheckpoint &&
								h(
									'td',
									{ title: attempt.checkpoint_at ?? '' },
									attempt.checkpoint
										? `${attempt.checkpoint} (${formatTime(attempt.checkpoint_at)})`
										: '—',
								),
							h(
								'td',
								{ className: 'wrap' },
								[attempt.error_code, attempt.error_message].filter(Boolean).join(': ') || '—',
							),
							timeCell(attempt.lease_until),
							h(
								'td',
								{ className: 'mono', title: attempt.attempt_id },
								attempt.attempt_id.slice(0, 13) + '…',
							),
						),
					),
				),
			),
		);
	}

	function renderStory(story: JobStory): void {
		const job = story.job;
		byId('story-title').textContent = `Job ${job.job_id}`;
		const status = h('span', {}, badge(job.status));
		if (job.lease_expired) status.append(' ', h('span', { className: 'warn' }, 'lease expired'));
		const parts: Node[] = [
			h('h3', {}, 'Received'),
			facts([
				['Status', status],
				['Queue', job.queue],
				['Received', formatTime(job.created_at)],
				['Idempotency key', job.idempotency_key],
				['Correlation id', job.correlation_id],
				['Callback URL', job.callback_url],
				['Ordering key', job.ordering_key],
				['Priority', String(job.priority)],
				['Attempts', `${job.attempts} of ${job.max_attempts}`],
				['Runs at', formatTime(job.run_at)],
				['Finished', formatTime(job.finished_at)],
			]),
			textBlock('Payload', job.payload),
			h('h3', {}, `Attempts (${story.attempts_total})`),
			attemptsTable(story.attempts, true),
		];
		if (story.attempts_total > story.attempts.length)
			parts.push(h('p', { className: 'muted' }, `Showing the newest ${story.attempts.length}.`));
		if (job.result) parts.push(h('h3', {}, 'Result'), textBlock('Result', job.result, true));
		if (job.error && job.status === 'cancelled') {
			// A cancel is no error: its message is the reason given for it (Job Status shows it
			// as cancel_reason, not as error).
			parts.push(
				h('h3', {}, 'Cancelled'),
				facts([['Reason', job.error.message ? h('pre', {}, job.error.message) : null]]),
			);
		} else if (job.error) {
			parts.push(
				h('h3', {}, job.status === 'failed' ? 'Error' : 'Last error'),
				facts([
					['Code', job.error.code],
					['Class', job.error.class],
					['Message', job.error.message ? h('pre', {}, job.error.message) : null],
					['Node', job.error.node],
					['Execution', executionLink(job.error.execution_path, job.error.execution_id)],
				]),
			);
		}
		parts.push(h('h3', {}, `Callback events (${story.callback_events.length})`));
		if (story.callback_events.length === 0) {
			parts.push(
				h(
					'p',
					{ className: 'muted' },
					job.callback_url ? 'None yet.' : 'The job has no callback URL.',
				),
			);
		}
		for (const event of story.callback_events) {
			parts.push(
				h(
					'div',
					{ className: 'event' },
					facts([
						['Event', `${event.event_type ?? 'event'} · ${event.event_id}`],
						['Destination', event.destination],
						['Status', badge(event.status)],
						['Deliveries', `${event.attempts} of ${event.max_attempts}`],
						['Delivered at', formatTime(event.finished_at)],
						[
							'Error',
							event.error_code || event.error_message
								? [event.error_code, event.error_message].filter(Boolean).join(': ')
								: null,
						],
					]),
					attemptsTable(event.deliveries, false),
				),
			);
		}
		byId('story').replaceChildren(...parts);
		byId('story-requeue').hidden = job.status !== 'failed';
		byId('story-cancel').hidden = job.status !== 'queued';
		showStoryPanel(true);
	}

	function showStoryPanel(visible: boolean): void {
		byId('story-panel').hidden = !visible;
		byId('work').classList.toggle('with-story', visible);
	}

	async function loadStory(): Promise<void> {
		if (!state.selected) return;
		const request = ++state.requests.story;
		try {
			const story = await api<JobStory>('job', { job_id: state.selected });
			if (request !== state.requests.story) return;
			state.story = story;
			renderStory(story);
		} catch (error) {
			if (request !== state.requests.story) return;
			if (error instanceof ApiError && error.status === 404) {
				state.story = null;
				byId('story-title').textContent = 'Job not found';
				byId('story').replaceChildren(
					h('p', { className: 'muted' }, 'No job with this id (it may have been purged).'),
				);
				byId('story-requeue').hidden = true;
				byId('story-cancel').hidden = true;
				showStoryPanel(true);
				return;
			}
			throw error;
		}
	}

	function selectJob(jobId: string | null): void {
		state.selected = jobId;
		if (jobId) {
			if (location.hash !== `#job=${jobId}`) location.hash = `job=${jobId}`;
			for (const row of document.querySelectorAll<HTMLTableRowElement>('#jobs-body tr'))
				row.classList.toggle('selected', row.dataset.jobId === jobId);
			void guarded(loadStory);
		} else {
			state.story = null;
			showStoryPanel(false);
			if (location.hash) history.replaceState(null, '', location.pathname + location.search);
		}
	}

	// ---------------------------------------------------------------- actions

	function confirmDialog(title: string, text: string, confirmLabel: string): Promise<boolean> {
		const dialog = byId<HTMLDialogElement>('confirm');
		byId('confirm-title').textContent = title;
		byId('confirm-text').textContent = text;
		byId('confirm-yes').textContent = confirmLabel;
		dialog.returnValue = '';
		return new Promise((resolve) => {
			dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
			dialog.showModal();
		});
	}

	function attemptsText(): string {
		const attempts = Number(config.additionalAttempts) || 3;
		return `${attempts} more attempt${attempts === 1 ? '' : 's'}`;
	}

	function describeResult(result: ActionResult, verb: string): string {
		const unchanged = result.jobs.filter((job) => !job.changed);
		const states = new Map<string, number>();
		for (const job of unchanged)
			states.set(job.status ?? 'not found', (states.get(job.status ?? 'not found') ?? 0) + 1);
		const rest = [...states].map(([status, count]) => `${count} ${status}`).join(', ');
		return `${verb} ${result.changed} of ${result.requested} job${result.requested === 1 ? '' : 's'}.${unchanged.length > 0 ? ` Left unchanged: ${rest}.` : ''}`;
	}

	async function runAction(
		name: 'requeue' | 'cancel',
		jobIds: string[],
		asOf: string,
	): Promise<void> {
		const result = await api<ActionResult>(
			'action',
			{},
			{ name, body: { action: name, job_ids: jobIds, as_of: asOf } },
		);
		notify(describeResult(result, name === 'requeue' ? 'Requeued' : 'Cancelled'));
		await refresh();
	}

	async function requeueSelected(): Promise<void> {
		const story = state.story;
		if (!story || story.job.status !== 'failed') return;
		const ok = await confirmDialog(
			'Requeue this job?',
			`Job ${story.job.job_id} (${story.job.queue}) failed with ${story.job.error?.code ?? 'an error'}. It goes back to the queue with ${attemptsText()}.`,
			'Requeue',
		);
		if (ok) await runAction('requeue', [story.job.job_id], story.as_of);
	}

	async function cancelSelected(): Promise<void> {
		const story = state.story;
		if (!story || story.job.status !== 'queued') return;
		const ok = await confirmDialog(
			'Cancel this job?',
			`Job ${story.job.job_id} (${story.job.queue}) has not started yet; it will not run.`,
			'Cancel job',
		);
		if (ok) await runAction('cancel', [story.job.job_id], story.as_of);
	}

	async function requeueFiltered(): Promise<void> {
		const limit = Math.min(
			1000,
			Math.max(1, Math.floor(Number(byId<HTMLInputElement>('bulk-limit').value) || 100)),
		);
		const query = { ...filterQuery(), status: 'failed', limit: String(limit), cursor: '' };
		const page = await api<JobListPage>('jobs', query);
		if (page.jobs.length === 0) {
			notify('No failed jobs match this filter.');
			return;
		}
		const where = [
			query.queue ? `queue ${query.queue}` : 'all queues',
			query.text ? `matching "${query.text}"` : null,
			query.from || query.to ? 'in the chosen time range' : null,
		]
			.filter(Boolean)
			.join(', ');
		const ok = await confirmDialog(
			`Requeue ${page.jobs.length} failed job${page.jobs.length === 1 ? '' : 's'}?`,
			`The ${page.jobs.length} newest failed jobs (${where})${page.next_cursor ? `; more match beyond the limit of ${limit}` : ''} go back to their queues with ${attemptsText()} each.`,
			'Requeue',
		);
		if (ok)
			await runAction(
				'requeue',
				page.jobs.map((job) => job.job_id),
				page.as_of,
			);
	}

	// ---------------------------------------------------------------- refresh

	async function refresh(): Promise<void> {
		if (state.refreshing || state.ended) return;
		state.refreshing = true;
		try {
			await guarded(async () => {
				const work: Array<Promise<void>> = [loadOverview()];
				// Only the first page follows new jobs; an older page stays as it was read.
				if (state.cursors.length === 1) work.push(loadJobs());
				if (state.selected) work.push(loadStory());
				await Promise.all(work);
				state.lastRefresh = Date.now();
			});
		} finally {
			state.refreshing = false;
			updateRefreshState();
		}
	}

	function updateRefreshState(): void {
		if (state.ended) return;
		const seconds = state.lastRefresh ? Math.round((Date.now() - state.lastRefresh) / 1000) : null;
		byId('refresh-state').textContent =
			seconds === null ? 'Loading…' : `Updated ${seconds === 0 ? 'just now' : `${seconds} s ago`}`;
	}

	// ---------------------------------------------------------------- wiring

	const form = byId<HTMLFormElement>('filter');
	form.addEventListener('submit', (event) => {
		event.preventDefault();
		state.filter = {
			queue: byId<HTMLSelectElement>('f-queue').value,
			status: byId<HTMLSelectElement>('f-status').value,
			from: byId<HTMLInputElement>('f-from').value,
			to: byId<HTMLInputElement>('f-to').value,
			text: byId<HTMLInputElement>('f-text').value,
		};
		void guarded(() => loadJobs(true));
	});
	byId('f-reset').addEventListener('click', () => {
		form.reset();
		state.filter = { queue: '', status: '', from: '', to: '', text: '' };
		void guarded(() => loadJobs(true));
	});
	byId('page-next').addEventListener('click', () => {
		if (!state.page?.next_cursor) return;
		state.cursors.push(state.page.next_cursor);
		void guarded(() => loadJobs());
	});
	byId('page-prev').addEventListener('click', () => {
		if (state.cursors.length > 1) state.cursors.pop();
		void guarded(() => loadJobs());
	});
	byId('page-newest').addEventListener('click', () => void guarded(() => loadJobs(true)));
	byId('bulk-requeue').addEventListener('click', () => void guarded(requeueFiltered));
	byId('story-requeue').addEventListener('click', () => void guarded(requeueSelected));
	byId('story-cancel').addEventListener('click', () => void guarded(cancelSelected));
	byId('story-close').addEventListener('click', () => selectJob(null));

	const fromHash = () => {
		const match = /^#job=([0-9a-fA-F-]{36})$/.exec(location.hash);
		return match ? match[1].toLowerCase() : null;
	};
	window.addEventListener('hashchange', () => {
		const id = fromHash();
		if (id && id !== state.selected) selectJob(id);
	});
	state.selected = fromHash();

	let timer = window.setInterval(() => void refresh(), refreshMs);
	byId<HTMLInputElement>('auto-refresh').addEventListener('change', (event) => {
		window.clearInterval(timer);
		if ((event.target as HTMLInputElement).checked)
			timer = window.setInterval(() => void refresh(), refreshMs);
	});
	window.setInterval(updateRefreshState, 1000);
	void refresh();
}

main();
