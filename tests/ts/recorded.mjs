// The transport both content.mjs and elicit.mjs use: `python -m mcpwrap serve TOOLS` over stdio,
// from the repository root, with every message in both directions recorded in `wire`.

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
