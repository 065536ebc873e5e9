// The official MCP TypeScript SDK's OAuth client (client/auth.js: an OAuthClientProvider given to
// StreamableHTTPClientTransport as its `authProvider`) against a `mcpwrap serve --http --oauth-issuer`
// the test started, whose issuer is oidc-provider (tests/ts/oidc.mjs). The SDK finds the issuer from
// mcpwrap's 401 and RFC 9728 metadata, picks the RFC 8707 resource and the scope, and sends the user
// agent to the authorization URL; here the user agent is fetch, following the redirects through
// oidc-provider's sign-in and consent (which oidc.mjs completes) to the redirect URI, whose code the
// transport then exchanges (PKCE) in finishAuth. With the token it lists tools and calls them.
//
//   MCP_URL=http://127.0.0.1:PORT/mcp OAUTH_CALLS='[...]' node tests/ts/oauth-client.mjs <python> <tools> <tmpdir>
//
// OAUTH_CALLS: [[tool, arguments], ...] called in order, each outcome recorded. Prints one JSON
// summary line on stdout (exit 0 when every step ran, 1 otherwise); the wire goes to <tmpdir>/wire.jsonl.

import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { report, tap } from './recorded.mjs';

const TIMEOUT_MS = 30_000;                 // hang guards only
const REDIRECT = 'http://127.0.0.1/callback';   // oidc.mjs's pre-registered public client's
const [, , tmpArg] = process.argv.slice(2);
const tmpdir = path.resolve(tmpArg);
const url = new URL(process.env.MCP_URL);
const calls = JSON.parse(process.env.OAUTH_CALLS ?? '[]');
const wire = [];
const summary = { ok: false, step: 'start', error: null, authorizations: [], calls: [] };

/** The user agent: follows `start` through the authorization server's redirects (its cookies kept)
 * until the one to the redirect URI, and returns that URL's query. */
async function userAgent(start) {
  const cookies = new Map();
  let next = start;
  for (let hop = 0; hop < 20; hop++) {
    if (next.startsWith(REDIRECT)) return new URL(next).searchParams;
    const response = await fetch(next, { redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS),
      headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      const [name, value] = [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
      if (value) cookies.set(name, value); else cookies.delete(name);
    }
    const location = response.headers.get('location');
    if (!location) throw new Error(`${next}: ${response.status} without a redirect: ${await response.text()}`);
    next = new URL(location, next).href;
  }
  throw new Error('too many redirects');
}

/** OAuthClientProvider: a pre-registered public client (oidc.mjs's), everything kept in memory. */
class Provider {
  constructor() { this.saved = {}; this.code = null; }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return { client_name: 'mcpwrap-ts-oauth', redirect_uris: [REDIRECT], grant_types: ['authorization_code'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  state() { return this.saved.state = crypto.randomUUID(); }
  clientInformation() { return { client_id: 'mcpwrap-test' }; }
  tokens() { return this.saved.tokens; }
  saveTokens(tokens) { this.saved.tokens = tokens; }
  saveCodeVerifier(verifier) { this.saved.verifier = verifier; }
  codeVerifier() { return this.saved.verifier; }
  async redirectToAuthorization(authorizationUrl) {
    const asked = authorizationUrl.searchParams;
    summary.authorizations.push({ resource: asked.get('resource'), scope: asked.get('scope'),
      method: asked.get('code_challenge_method') });
    const answer = await userAgent(authorizationUrl.href);
    if (answer.get('state') !== this.saved.state) throw new Error(`state ${answer.get('state')} is not ours`);
    this.code = answer.get('code');
  }
}

async function connect(provider) {
  const transport = tap(new StreamableHTTPClientTransport(url, { authProvider: provider }), wire);
  const client = new Client({ name: 'mcpwrap-ts-oauth', version: '1.0.0' });
  await client.connect(transport, { timeout: TIMEOUT_MS });
  return { client, transport };
}

async function main() {
  fs.mkdirSync(tmpdir, { recursive: true });
  const provider = new Provider();
  summary.step = 'connect (unauthorized)';
  try {
    await connect(provider);
    throw new Error('connected without authorization');
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  summary.step = 'finishAuth';
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await first.finishAuth(provider.code);
  summary.tokenType = provider.saved.tokens?.token_type;
  summary.grantedScope = provider.saved.tokens?.scope ?? null;

  summary.step = 'connect (authorized)';
  const { client, transport } = await connect(provider);
  summary.sessionId = transport.sessionId ?? null;
  summary.step = 'tools/list';
  summary.tools = (await client.listTools(undefined, { timeout: TIMEOUT_MS })).tools.map(t => t.name);
  for (const [name, args] of calls) {
    summary.step = `tools/call ${name}`;
    try {
      const result = await client.callTool({ name, arguments: args }, undefined, { timeout: TIMEOUT_MS });
      summary.calls.push({ name, isError: result.isError ?? false,
        text: result.content.find(block => block.type === 'text')?.text ?? null });
    } catch (err) {
      summary.calls.push({ name, error: { code: err?.code ?? null, message: String(err?.message ?? err) } });
    }
  }
  summary.step = 'close';
  await transport.terminateSession();
  await client.close();
  summary.step = 'done';
}

report(main, summary, tmpdir, wire);
