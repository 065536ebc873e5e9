// A command's question answered through a task parked in input_required, driven by the official MCP
// TypeScript SDK, in both task designs (tests/fixtures/ask_tasks.toml, tool `apply`):
// - 2025-11-25 tasks: the SDK's own client.experimental.tasks.callToolStream creates the task, polls
//   tasks/get, meets input_required, calls tasks/result, and its ElicitRequest handler answers the
//   elicitation/create the server relays (tagged with the task: related-task) with TS_LEGACY_ANSWER
//   (JSON; true by default).
// - 2026-07-28 tasks extension (which this SDK predates): client.request with the modern _meta:
//   tools/call creates the task, tasks/get shows it input_required with the question in inputRequests,
//   tasks/update brings the answer (TS_MODERN_ANSWER, JSON; false by default), tasks/get until it is completed.
//
//   node tests/ts/tasks-ask.mjs <python> <tests/fixtures/ask_tasks.toml> <tmpdir>
//
// With TS_HTTP_URL set it talks to that `serve --http` instead (the SDK's StreamableHTTPClientTransport:
// the question comes on the tasks/result POST's SSE stream), 2025-11-25 tasks only: this SDK's
// transport sends none of the headers a 2026-07-28 POST must mirror.
// The command writes what it received to <tmpdir>/legacy.out and <tmpdir>/modern.out. Prints one JSON
// summary line on stdout (exit 0 when every step ran, 1 otherwise); the wire goes to <tmpdir>/wire.jsonl.

import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema, ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { recordedTransport, report, tap } from './recorded.mjs';

const TIMEOUT_MS = 30_000;                 // hang guards only
const TASKS = 'io.modelcontextprotocol/tasks';
const RELATED = 'io.modelcontextprotocol/related-task';
const [python, toolsFile, tmpArg] = process.argv.slice(2);
const tmpdir = path.resolve(tmpArg);
const url = process.env.TS_HTTP_URL;
const tool = process.env.TS_TOOL ?? 'apply';
const legacyAnswer = JSON.parse(process.env.TS_LEGACY_ANSWER ?? 'true');
const modernAnswer = JSON.parse(process.env.TS_MODERN_ANSWER ?? 'false');
const wire = [];
const summary = { ok: false, step: 'start', error: null, legacy: { statuses: [], asked: [] }, modern: { statuses: [] } };
let stderrText = '';

async function main() {
  fs.mkdirSync(tmpdir, { recursive: true });
  const transport = url ? tap(new StreamableHTTPClientTransport(new URL(url)), wire)
    : recordedTransport(python, toolsFile, tmpdir, wire, text => { stderrText += text; });
  const client = new Client({ name: 'mcpwrap-ts-tasks-ask', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, request => {
    summary.legacy.asked.push({ message: request.params.message, related: request.params._meta?.[RELATED] ?? null });
    return { action: 'accept', content: { answer: legacyAnswer } };
  });
  await client.connect(transport, { timeout: TIMEOUT_MS });
  await legacy(client);
  if (!url) await modern(client);
  await client.close();
  summary.step = 'done';
}

async function legacy(client) {
  summary.step = 'legacy: callToolStream';
  const stream = client.experimental.tasks.callToolStream(
    { name: tool, arguments: { out: path.join(tmpdir, 'legacy.out') } }, CallToolResultSchema,
    { task: { ttl: 60_000 }, timeout: TIMEOUT_MS });
  for await (const message of stream) {
    if (message.type === 'taskCreated') summary.legacy.taskId = message.task.taskId;
    if (message.type === 'taskStatus') summary.legacy.statuses.push(message.task.status);
    if (message.type === 'result') summary.legacy.result = message.result;
    if (message.type === 'error') throw message.error;
  }
}

function modernRequest(client, method, params) {
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions: { [TASKS]: {} } } };
  return client.request({ method, params: { ...params, _meta: meta } }, ResultSchema, { timeout: TIMEOUT_MS });
}

async function modernUntil(client, taskId, done) {
  const deadline = Date.now() + TIMEOUT_MS;
  while (Date.now() < deadline) {
    const task = await modernRequest(client, 'tasks/get', { taskId });
    if (summary.modern.statuses.at(-1) !== task.status) summary.modern.statuses.push(task.status);
    if (done(task)) return task;
    await new Promise(resolve => setTimeout(resolve, 50));
  }
  throw new Error(`task ${taskId} never reached the awaited status`);
}

async function modern(client) {
  summary.step = 'modern: tools/call';
  const created = await modernRequest(client, 'tools/call',
    { name: tool, arguments: { out: path.join(tmpdir, 'modern.out') } });
  summary.modern.resultType = created.resultType;
  summary.step = 'modern: parked';
  const parked = await modernUntil(client, created.taskId, task => task.status === 'input_required');
  const [key, question] = Object.entries(parked.inputRequests)[0];
  summary.modern.question = question;
  summary.step = 'modern: tasks/update';
  summary.modern.update = await modernRequest(client, 'tasks/update',
    { taskId: created.taskId, inputResponses: { [key]: { action: 'accept', content: { answer: modernAnswer } } } });
  summary.step = 'modern: completed';
  summary.modern.result = (await modernUntil(client, created.taskId, task => task.status === 'completed')).result;
}

report(main, summary, tmpdir, wire, () => ({ 'server-stderr.log': stderrText }));
