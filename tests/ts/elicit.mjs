// Elicitation forms through the official MCP TypeScript SDK: a titled single-select (oneOf), a legacy
// enumNames enum and a titled multi-select (items.anyOf) are asked for, parsed by the SDK's own
// ElicitRequest schema, answered, and the tool runs with the answers.
//
//   node tests/ts/elicit.mjs <python> <tests/fixtures/forms.toml> <tmpdir>
//
// Prints one JSON summary line on stdout (exit 0 when every step ran, 1 otherwise) and writes the
// wire, both directions, to <tmpdir>/wire.jsonl for tests/blackbox/sdk/test_ts_elicit.py to schema-check.

import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { recordedTransport, report } from './recorded.mjs';

const TIMEOUT_MS = 30_000;                 // hang guards only
const ANSWER = { env: 'prod', size: 'm', tags: ['a', 'b'] };
const [python, toolsFile, tmpArg] = process.argv.slice(2);
const tmpdir = path.resolve(tmpArg);
const wire = [];
const summary = { ok: false, step: 'start', error: null, forms: [] };
let stderrText = '';

async function main() {
  fs.mkdirSync(tmpdir, { recursive: true });
  const transport = recordedTransport(python, toolsFile, tmpdir, wire, text => { stderrText += text; });
  const client = new Client({ name: 'mcpwrap-ts-elicit', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } });
  // The SDK parses the request with its ElicitRequestSchema before this runs: what arrives is what it kept.
  client.setRequestHandler(ElicitRequestSchema, request => {
    const form = request.params.requestedSchema;
    summary.forms.push(form);
    return { action: 'accept', content: Object.fromEntries(Object.keys(form.properties).map(k => [k, ANSWER[k]])) };
  });
  await client.connect(transport, { timeout: TIMEOUT_MS });

  summary.step = 'tools/list';
  const { tools } = await client.listTools(undefined, { timeout: TIMEOUT_MS });
  summary.required = tools.find(t => t.name === 'pick').inputSchema.required ?? [];

  summary.step = 'pick';
  const result = await client.callTool({ name: 'pick', arguments: {} }, undefined, { timeout: TIMEOUT_MS });
  summary.isError = result.isError ?? false;
  summary.text = result.content.find(block => block.type === 'text')?.text ?? null;
  await client.close();
  summary.step = 'done';
}

report(main, summary, tmpdir, wire, () => ({ 'server-stderr.log': stderrText }));
