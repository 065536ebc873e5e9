// What the TypeScript clients share: the transport content.mjs and elicit.mjs use (`python -m
// mcpwrap serve TOOLS` over stdio, from the repository root, with every message in both directions
// recorded in `wire`: `tap`, which http.mjs puts on its Streamable HTTP transport too), what /proc
// says about a tool's processes, and the report each client ends with.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export function recordedTransport(python, toolsFile, tmpdir, wire, onStderr) {
  const transport = new StdioClientTransport({
    command: python,
    args: ['-m', 'mcpwrap', 'serve', path.resolve(toolsFile),
      '--secret-file', path.join(tmpdir, 'secret'), '--state-dir', path.join(tmpdir, 'state')],
    env: { ...getDefaultEnvironment(), PATH: process.env.PATH ?? '/usr/bin:/bin',
      PYTHONPATH: [repoRoot, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) },
    cwd: repoRoot,
    stderr: 'pipe',
  });
  transport.stderr.on('data', chunk => onStderr(chunk.toString()));
  return tap(transport, wire);
}

export function tap(transport, wire) {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => { wire.push({ dir: '>', msg: message }); return send(message, options); };
  let inner;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => (inner ? message => { wire.push({ dir: '<', msg: message }); inner(message); } : undefined),
    set: handler => { inner = handler; },
  });
  return transport;
}

/** Live processes whose command line carries `marker` (and, given `envEntry`, whose environment holds it). */
export function processesWith(marker, envEntry) {
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline;
    try {
      cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1');
      if (!cmdline.includes(marker)) continue;
      if (envEntry && !fs.readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(envEntry)) continue;
    } catch {
      continue;                                   // gone meanwhile, or not ours
    }
    found.push({ pid: Number(entry), cmdline: cmdline.split('\0').filter(Boolean).join(' ') });
  }
  return found;
}

// Runs `main` and reports, whatever happened: the step that failed, the wire as JSON lines, any
// `files()` (name -> text, read at the end) into `tmpdir`, then `summary` as one line on stdout.
export function report(main, summary, tmpdir, wire, files = () => ({})) {
  main().then(
    () => 0,
    err => { summary.error = `${summary.step}: ${err?.stack ?? err}`; return 1; },
  ).then(code => {
    summary.ok = code === 0;
    fs.writeFileSync(path.join(tmpdir, 'wire.jsonl'), wire.map(w => JSON.stringify(w)).join('\n') + '\n');
    for (const [name, text] of Object.entries(files())) fs.writeFileSync(path.join(tmpdir, name), text);
    process.stdout.write(JSON.stringify(summary) + '\n', () => process.exit(code));
  });
}
