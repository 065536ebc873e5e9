// A real authorization server for tests/test_oauth_provider.py: oidc-provider on a loopback port.
// Resource indicators (RFC 8707) mint JWT access tokens whose `aud` is the resource asked for, with
// the scopes granted; a public client uses authorization_code + PKCE. The interaction signs in the
// account named by argv[2] and grants what was asked, so the test drives the flow over HTTP alone.
// argv[3] `opaque` mints opaque access tokens instead, for RFC 7662 introspection, which the
// confidential client `mcpwrap-rs` (secret RS_SECRET) may call. Prints the issuer URL on stdout once
// listening.
import http from 'node:http';
import Provider from 'oidc-provider';

const account = process.argv[2] || 'alice';
const accessTokenFormat = process.argv[3] === 'opaque' ? 'opaque' : 'jwt';
const RS_SECRET = 'mcpwrap-rs-secret-0123456789';
const scopes = 'openid mcp deploy';
const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{ client_id: 'mcpwrap-test', token_endpoint_auth_method: 'none', grant_types: ['authorization_code'],
              response_types: ['code'], redirect_uris: ['http://127.0.0.1/callback'] },
            { client_id: 'mcpwrap-rs', client_secret: RS_SECRET, token_endpoint_auth_method: 'client_secret_basic',
              grant_types: [], response_types: [], redirect_uris: [] }],
  scopes: scopes.split(' '),
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({ scope: 'mcp deploy', audience: resource,
                                                   accessTokenFormat, jwt: { sign: { alg: 'RS256' } } }),
    },
  },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

server.on('request', async (req, res) => {
  if (!req.url.startsWith('/interaction/')) return provider.callback()(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      return await provider.interactionFinished(req, res, { login: { accountId: account } });
    }
    const grant = details.grantId ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: account, clientId: details.params.client_id });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, wanted] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, wanted.join(' '));
    }
    return await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } },
                                              { mergeWithLastSubmission: true });
  } catch (err) {
    res.statusCode = 500;
    res.end(String(err));
  }
});
process.stdout.write(issuer + '\n');
