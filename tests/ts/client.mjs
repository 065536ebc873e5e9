// Drive `mcpwrap serve` with the official MCP TypeScript SDK (Client + StdioClientTransport).
//
//   node tests/ts/client.mjs <python> <tools.toml> <tmpdir>
//
// Prints one JSON summary line on stdout and exits 0 when every check passed; on any
// failure prints "ts-client: FAIL ..." on stderr, still prints the (partial) summary with
// ok=false, and exits 1. Every message on the wire is written to <tmpdir>/wire.jsonl and
// the server's stderr to <tmpdir>/server-stderr.log, for diagnosing failures.
// Run by tests/blackbox/sdk/test_ts_client.py; needs `npm ci --prefix tests/ts` first.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { processesWith } from './recorded.mjs';

const EXPECTED_TOOLS = ['echo', 'slow', 'sleeper', 'status', 'media', 'fail'];
const SLEEP_MARKER = '60.4217';          // sleeper's sleep duration in tests/fixtures/ts.toml
const RUN_ENV = 'TS_RUN_OF_MCPWRAP';        // set for the server, inherited by its tools: tells our processes apart
const CALL_TIMEOUT_MS = 30_000;          // hang guards only: every wait below ends on an event
const WATCHDOG_MS = 55_000;              // below the pytest wrapper's 60 s subprocess timeout

const [python, toolsFile, tmpArg] = process.argv.slice(2);
if (!python || !toolsFile || !tmpArg) {
  process.stderr.write('usage: node client.mjs <python> <tools.toml> <tmpdir>\n');
  process.exit(2);
}
const tmpdir = path.resolve(tmpArg);
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const started = Date.now();

const summary = {
  ok: false,
  sdkVersion: JSON.parse(fs.readFileSync(
    new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8')).version,
  marker: SLEEP_MARKER,
  runId: tmpdir,
  step: 'start',
  protocolVersion: null,
  serverInfo: null,
  tools: null,
  echo: null,
  structuredContent: null,
  progress: [],
  logs: [],
  cancelled: false,
  cancelError: null,
  cancelRequestId: null,
  cancelNotificationSent: false,
  lateResponses: [],
  sleepersBeforeCancel: null,
  sleepersAfterCancel: null,
  sleepersGoneAfterMs: null,
  stillAlive: null,
  sdkErrors: [],
  serverPid: null,
  serverExited: null,
  elapsedMs: null,
  error: null,
};

// --- wire log ---------------------------------------------------------------------------
const wire = [];
function record(dir, msg) {
  wire.push({ t: Date.now() - started, dir, msg });
}

// --- helpers ----------------------------------------------------------------------------
class CheckFailed extends Error {}
function check(cond, message) {
  if (!cond) throw new CheckFailed(message);
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function firstText(result) {
  const block = (result.content ?? []).find(b => b.type === 'text');
  return block ? block.text : null;
}

const procAvailable = fs.existsSync('/proc/self/cmdline');
/** Live processes of this run whose command line carries the sleeper's marker. */
function sleepers() {
  return procAvailable ? processesWith(SLEEP_MARKER, `${RUN_ENV}=${tmpdir}`) : null;
}

let transport;
let client;
let stderrText = '';

function writeArtifacts() {
  try {
    fs.writeFileSync(path.join(tmpdir, 'wire.jsonl'), wire.map(w => JSON.stringify(w)).join('\n') + '\n');
    fs.writeFileSync(path.join(tmpdir, 'server-stderr.log'), stderrText);
  } catch (err) {
    process.stderr.write(`ts-client: could not write artifacts: ${err}\n`);
  }
}

function finish(code, error) {
  summary.elapsedMs = Date.now() - started;
  if (error) {
    summary.error = `${summary.step}: ${error instanceof Error ? error.message : String(error)}`;
    process.stderr.write(`ts-client: FAIL at step ${summary.step}: ${error instanceof Error ? error.stack ?? error.message : error}\n`);
  }
  summary.ok = code === 0;
  writeArtifacts();
  process.stdout.write(JSON.stringify(summary) + '\n', () => process.exit(code));
}

const watchdog = setTimeout(() => {
  if (transport?.pid) {
    try { process.kill(transport.pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  finish(1, new Error(`watchdog: still running after ${WATCHDOG_MS} ms`));
}, WATCHDOG_MS);

async function main() {
  fs.mkdirSync(tmpdir, { recursive: true });
  summary.step = 'connect';
  transport = new StdioClientTransport({
    command: python,
    args: ['-m', 'mcpwrap', 'serve', path.resolve(toolsFile),
      '--secret-file', path.join(tmpdir, 'secret'), '--state-dir', path.join(tmpdir, 'state')],
    env: {
      ...getDefaultEnvironment(),
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      PYTHONPATH: [repoRoot, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter),
      [RUN_ENV]: tmpdir,
    },
    cwd: repoRoot,
    stderr: 'pipe',
  });
  transport.stderr.on('data', chunk => { stderrText += chunk.toString(); });

  // Tap the wire: outgoing via send, incoming by wrapping whatever handler Protocol installs.
  const send = transport.send.bind(transport);
  transport.send = (message, options) => { record('>', message); return send(message, options); };
  let inner;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => (inner ? message => { record('<', message); inner(message); } : undefined),
    set: handler => { inner = handler; },
  });

  client = new Client({ name: 'mcpwrap-ts-test', version: '1.0.0' }, { capabilities: {} });
  client.onerror = err => summary.sdkErrors.push(String(err?.message ?? err));
  client.setNotificationHandler(LoggingMessageNotificationSchema, note => {
    summary.logs.push(note.params);
  });
  await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
  summary.serverPid = transport.pid;
  summary.serverInfo = client.getServerVersion() ?? null;
  const init = wire.find(w => w.dir === '<' && w.msg.result?.protocolVersion);
  summary.protocolVersion = init?.msg.result.protocolVersion ?? null;

  summary.step = 'tools/list';
  const { tools } = await client.listTools(undefined, { timeout: CALL_TIMEOUT_MS });
  summary.tools = tools.map(t => t.name);
  check(isDeepStrictEqual([...summary.tools].sort(), [...EXPECTED_TOOLS].sort()),
    `tools/list names ${JSON.stringify(summary.tools)} != ${JSON.stringify(EXPECTED_TOOLS)}`);

  summary.step = 'echo';
  const msg = 'hello; rm -rf /';
  const echo = await client.callTool({ name: 'echo', arguments: { msg } }, undefined, { timeout: CALL_TIMEOUT_MS });
  summary.echo = firstText(echo);
  check(echo.isError !== true, `echo returned isError: ${JSON.stringify(echo)}`);
  check(summary.echo === `${msg}\n`, `echo text ${JSON.stringify(summary.echo)} is not ${JSON.stringify(msg + '\n')}`);

  summary.step = 'status (structuredContent)';
  // callTool also validates structuredContent against the outputSchema cached by listTools.
  const status = await client.callTool({ name: 'status', arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
  summary.structuredContent = status.structuredContent ?? null;
  check(isDeepStrictEqual(summary.structuredContent, { ok: true, count: 3 }),
    `status structuredContent ${JSON.stringify(summary.structuredContent)}`);

  summary.step = 'logging/setLevel';
  await client.setLoggingLevel('info', { timeout: CALL_TIMEOUT_MS });

  summary.step = 'slow (progress + logs)';
  const slow = await client.callTool({ name: 'slow', arguments: {} }, undefined, {
    timeout: CALL_TIMEOUT_MS,
    onprogress: p => summary.progress.push(p),
  });
  check(slow.isError !== true && firstText(slow) === 'finished\n', `slow result ${JSON.stringify(slow)}`);
  const values = summary.progress.map(p => p.progress);
  check(values.length > 0, 'no notifications/progress for slow');
  check(values.every((v, i) => i === 0 || v > values[i - 1]), `progress not strictly increasing: ${JSON.stringify(values)}`);
  const slowLogs = summary.logs.filter(l => l.logger === 'slow');
  check(slowLogs.length > 0, `no notifications/message from slow at level info: ${JSON.stringify(summary.logs)}`);

  summary.step = 'sleeper (cancel)';
  const controller = new AbortController();
  const sentBefore = wire.length;
  let settled = false;
  const outcome = client.callTool({ name: 'sleeper', arguments: {} }, undefined,
    { timeout: CALL_TIMEOUT_MS, signal: controller.signal })
    .then(result => ({ result }), error => ({ error }))
    .finally(() => { settled = true; });
  // Cancel only once sh and a sleep run (the watchdog bounds the wait), so the kill is what gets tested.
  while (procAvailable && !settled && (summary.sleepersBeforeCancel = sleepers()).length < 2) await sleep(50);
  summary.cancelled = !settled;
  controller.abort('ts-client cancels once the sleeper runs');
  const { result, error } = await outcome;
  check(summary.cancelled && !result, `sleeper settled before our abort: ${JSON.stringify(result ?? String(error))}`);
  summary.cancelError = String(error?.message ?? error);
  const request = wire.slice(sentBefore).find(w => w.dir === '>' && w.msg.method === 'tools/call');
  summary.cancelRequestId = request?.msg.id ?? null;
  summary.cancelNotificationSent = wire.some(w => w.dir === '>' && w.msg.method === 'notifications/cancelled'
    && w.msg.params?.requestId === summary.cancelRequestId);
  check(summary.cancelNotificationSent, 'the SDK sent no notifications/cancelled for the sleeper call');
  if (procAvailable) {
    check(summary.sleepersBeforeCancel.length > 0,
      `no "sleep ${SLEEP_MARKER}" process of this run was running when we cancelled`);
    const deadline = Date.now() + 30_000;
    const cancelAt = Date.now();
    while ((summary.sleepersAfterCancel = sleepers()).length > 0 && Date.now() < deadline) await sleep(50);
    if (summary.sleepersAfterCancel.length === 0) summary.sleepersGoneAfterMs = Date.now() - cancelAt;
    check(summary.sleepersAfterCancel.length === 0,
      `sleeper processes survive the cancellation by 30 s: ${JSON.stringify(summary.sleepersAfterCancel)}`);
  }

  summary.step = 'echo after cancel';
  const again = await client.callTool({ name: 'echo', arguments: { msg: 'still alive' } }, undefined,
    { timeout: CALL_TIMEOUT_MS });
  summary.stillAlive = firstText(again);
  check(summary.stillAlive === 'still alive\n', `echo after cancel: ${JSON.stringify(again)}`);
  await sleep(200);                                // room for a (wrong) late answer to the cancelled id
  summary.lateResponses = wire.filter(w => w.dir === '<' && !('method' in w.msg)
    && w.msg.id === summary.cancelRequestId).map(w => w.msg);
  check(summary.lateResponses.length === 0,
    `server answered the cancelled request: ${JSON.stringify(summary.lateResponses)}`);
  check(summary.sdkErrors.length === 0, `SDK reported errors: ${JSON.stringify(summary.sdkErrors)}`);

  summary.step = 'close';
  await client.close();
  try {
    process.kill(summary.serverPid, 0);
    summary.serverExited = false;
  } catch {
    summary.serverExited = true;
  }
  summary.step = 'done';
}

main().then(
  () => { clearTimeout(watchdog); finish(0); },
  async err => {
    clearTimeout(watchdog);
    const failedStep = summary.step;
    try { await client?.close(); } catch { /* best effort */ }
    summary.step = failedStep;
    finish(1, err);
  },
);
