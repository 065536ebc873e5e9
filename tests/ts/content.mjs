// Resources, prompts, completions and output beyond the cap through the official MCP TypeScript SDK.
//
//   node tests/ts/content.mjs <python> <tests/fixtures/content.toml> <tmpdir>
//
// Prints one JSON summary line on stdout (exit 0 when every step ran, 1 otherwise) and writes the
// wire, both directions, to <tmpdir>/wire.jsonl for tests/blackbox/sdk/test_ts_client.py to schema-check.

import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { recordedTransport, report } from './recorded.mjs';

const TIMEOUT_MS = 30_000;                 // hang guards only
const [python, toolsFile, tmpArg] = process.argv.slice(2);
const tmpdir = path.resolve(tmpArg);
const wire = [];
const summary = { ok: false, step: 'start', error: null };
let stderrText = '';

async function readWhole(client, uri) {
  const parts = [];
  for (let next = uri; next;) {
    const page = await client.readResource({ uri: next }, { timeout: TIMEOUT_MS });
    const contents = page.contents[0];
    parts.push(contents.blob !== undefined ? Buffer.from(contents.blob, 'base64') : Buffer.from(contents.text, 'utf8'));
    next = page._meta['mcpwrap/page'].next;
  }
  return Buffer.concat(parts);
}

async function main() {
  fs.mkdirSync(tmpdir, { recursive: true });
  const transport = recordedTransport(python, toolsFile, tmpdir, wire, text => { stderrText += text; });
  const client = new Client({ name: 'mcpwrap-ts-content', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport, { timeout: TIMEOUT_MS });
  summary.capabilities = client.getServerCapabilities();

  summary.step = 'resources';
  summary.resources = (await client.listResources(undefined, { timeout: TIMEOUT_MS })).resources.map(r => r.name);
  const notesUri = (await client.listResources()).resources[0].uri;
  summary.notes = (await client.readResource({ uri: notesUri })).contents[0].text;
  summary.templates = (await client.listResourceTemplates()).resourceTemplates.map(t => t.uriTemplate);
  summary.greeting = (await client.readResource({ uri: 'greet://ts%20client' })).contents[0].text;

  summary.step = 'prompts';
  summary.prompts = (await client.listPrompts()).prompts.map(p => p.name);
  const prompt = await client.getPrompt({ name: 'review', arguments: { topic: 'style' } });
  summary.promptMessages = prompt.messages.map(m => [m.role, m.content.type, m.content.text ?? m.content.resource?.text]);
  summary.completion = (await client.complete({ ref: { type: 'ref/prompt', name: 'review' },
    argument: { name: 'topic', value: 'st' } })).completion.values;

  summary.step = 'beyond the cap';
  const links = [];
  for (let i = 0; i < 2; i++) {
    const result = await client.callTool({ name: 'big', arguments: {} }, undefined, { timeout: TIMEOUT_MS });
    links.push(result.content.find(block => block.type === 'resource_link').uri);
    summary.cappedText = result.content[0].text.length;
  }
  const data = await readWhole(client, links[1]);
  const expected = Buffer.alloc(256 * 40960);
  for (let i = 0; i < expected.length; i++) expected[i] = i % 256;
  summary.bytes = data.length;
  summary.byteExact = data.equals(expected);
  try {
    await client.readResource({ uri: links[0] });
    summary.evicted = null;
  } catch (err) {
    summary.evicted = { code: err.code, data: err.data };
  }
  summary.evictedUri = links[0];
  await client.close();
  summary.step = 'done';
}

report(main, summary, tmpdir, wire, () => ({ 'server-stderr.log': stderrText }));
