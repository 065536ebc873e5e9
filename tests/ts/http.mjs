// The official MCP TypeScript SDK over Streamable HTTP (StreamableHTTPClientTransport) against a
// `mcpwrap serve --http` the test started with tests/fixtures/http.toml: list tools, call with
// progress, cancel a running call (AbortSignal -> notifications/cancelled), and answer a confirmation
// (elicitation/create on the call's SSE stream) once with accept and once with decline.
//
//   TS_HTTP_URL=http://127.0.0.1:PORT/mcp TS_HTTP_SECS=<sleeper marker> node tests/ts/http.mjs <python> <tools> <tmpdir>
//
// (<python> and <tools> are what tests/blackbox/sdk/test_ts_content.py's run_client passes every client; the server
// is the test's.) Prints one JSON summary line on stdout (exit 0 when every step ran, 1 otherwise) and
// writes the wire, both directions, to <tmpdir>/wire.jsonl for tests/blackbox/sdk/test_ts_http.py to schema-check.

import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { processesWith, report, tap } from './recorded.mjs';

const TIMEOUT_MS = 30_000;                 // hang guards only: every wait below ends on an event
const [, , tmpArg] = process.argv.slice(2);
const tmpdir = path.resolve(tmpArg);
const url = process.env.TS_HTTP_URL;
const secs = process.env.TS_HTTP_SECS;
const wire = [];
const summary = { ok: false, step: 'start', error: null, forms: [], progress: [], sdkErrors: [] };
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
let answer = 'accept';                     // what the elicitation handler says to the next question

function text(result) {
  return result.content.find(block => block.type === 'text')?.text ?? null;
}

/** Poll `probe` until it returns something truthy (an event we cannot subscribe to: /proc). */
async function until(probe, what) {
  const deadline = Date.now() + TIMEOUT_MS;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function main() {
  fs.mkdirSync(tmpdir, { recursive: true });
  const transport = tap(new StreamableHTTPClientTransport(new URL(url)), wire);
  const client = new Client({ name: 'mcpwrap-ts-http', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } });
  client.onerror = err => summary.sdkErrors.push([summary.step, String(err?.message ?? err)]);
  client.setRequestHandler(ElicitRequestSchema, request => {
    const form = request.params.requestedSchema;
    summary.forms.push({ message: request.params.message, form, answer });
    if (answer !== 'accept') return { action: answer };
    return { action: 'accept', content: Object.fromEntries(Object.keys(form.properties).map(k => [k, true])) };
  });
  await client.connect(transport, { timeout: TIMEOUT_MS });
  summary.sessionId = transport.sessionId ?? null;
  summary.protocolVersion = transport.protocolVersion ?? null;

  summary.step = 'tools/list';
  summary.tools = (await client.listTools(undefined, { timeout: TIMEOUT_MS })).tools.map(t => t.name);

  summary.step = 'slow (progress)';
  const slow = await client.callTool({ name: 'slow', arguments: {} }, undefined,
    { timeout: TIMEOUT_MS, onprogress: p => summary.progress.push(p) });
  summary.slow = text(slow);

  summary.step = 'sleeper (cancel)';
  const controller = new AbortController();
  let settled = false;
  const outcome = client.callTool({ name: 'sleeper', arguments: { secs } }, undefined,
    { timeout: TIMEOUT_MS, signal: controller.signal })
    .then(result => ({ result }), error => ({ error }))
    .finally(() => { settled = true; });
  await until(() => settled || processesWith(secs).length >= 2, 'the sleeper to start');  // sh and a sleep
  summary.runningAtCancel = processesWith(secs).length;
  controller.abort('http.mjs cancels the running sleeper');
  const { result, error } = await outcome;
  summary.cancelOutcome = result ? { result } : { error: String(error?.message ?? error) };
  const call = wire.find(w => w.dir === '>' && w.msg.method === 'tools/call' && w.msg.params.name === 'sleeper');
  summary.cancelNotified = wire.some(w => w.dir === '>' && w.msg.method === 'notifications/cancelled'
    && w.msg.params?.requestId === call?.msg.id);
  await until(() => processesWith(secs).length === 0, 'the cancelled sleeper to be killed');
  summary.afterCancel = text(await client.callTool({ name: 'echo', arguments: { msg: 'still here' } }, undefined,
    { timeout: TIMEOUT_MS }));
  summary.answeredCancelled = wire.some(w => w.dir === '<' && !('method' in w.msg) && w.msg.id === call?.msg.id);

  for (const choice of ['accept', 'decline']) {
    summary.step = `create (${choice})`;
    answer = choice;
    const created = await client.callTool({ name: 'create', arguments: { path: path.join(tmpdir, choice) } },
      undefined, { timeout: TIMEOUT_MS });
    summary[choice] = { isError: created.isError ?? false, text: text(created) };
  }

  summary.step = 'close';
  await transport.terminateSession();        // DELETE: the session ends on the server too
  await client.close();
  summary.step = 'done';
}

report(main, summary, tmpdir, wire);
