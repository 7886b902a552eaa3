/**
 * A fuzz test of every route, generated from `GET /api/openapi.json`. For each operation it sends,
 * with a valid credential of the kind the operation declares (so requests get past the credential
 * check and reach validation and the handlers): wrong types for each body field (top level and one
 * level down), missing required fields, unknown fields with Object.prototype names, huge strings,
 * deep nesting, invalid JSON, NUL and unpaired surrogates, negative and huge numbers, arrays for
 * objects, form bodies, odd query values, repeated and prototype-named query parameters, and odd
 * path parameters; and, without a credential, a malformed body (401 first on every route that
 * needs one). Every answer must be below 500 and in the operation's error envelope, and the server
 * must be healthy at the end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from '../helpers/app.ts';
import { signIn, type SignedIn } from '../helpers/identity.ts';

type Json = unknown;
interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: Json[];
  const?: Json;
  anyOf?: Schema[];
  oneOf?: Schema[];
  default?: Json;
  minimum?: number;
}
interface Operation {
  method: string;
  path: string;
  security: string[];
  envelope: 'plain' | 'messaging';
  html: boolean;
  body?: Schema;
  query: { name: string; schema: Schema }[];
  params: string[];
}

interface Fixture {
  user: SignedIn;
  cliToken: string;
  pat: string;
  patToRevoke: string;
  sessionKey: string;
  sessionId: number;
  appId: string;
  appToken: string;
  fileId: string;
  msgId: number;
  peerPhone: string;
  peerLid: string;
  groupJid: string;
  inviteCode: string;
  invitationId: string;
}

const TOML = `[plugins.identity]
scrypt_cost = 1024
device_poll_interval_seconds = 1
login_max_failures_per_address = 1000000
login_max_failures_per_account = 1000000
[plugins.rate_limit]
enabled = false
[plugins.webhooks]
allow_private_networks = true
`;

let app: TestApp;
let fx: Fixture;
const tally = { operations: 0, requests: 0, fiveHundreds: [] as string[] };

beforeAll(async () => {
  app = await startApp(TOML);
  fx = await makeFixture();
}, 120_000);
afterAll(() => app?.close());

// ---------------------------------------------------------------------------------------------
// The fixture: one of every credential, and resources the path parameters can name.

async function json(method: string, path: string, body: unknown, headers: Record<string, string>): Promise<any> {
  const res = await app.request(method, path, { body, headers });
  if (res.status >= 300) throw new Error(`fixture ${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

async function makeFixture(): Promise<Fixture> {
  const user = await signIn(app);
  const h = user.headers;
  const code = await json('POST', '/oauth/device/code', { client_id: 'wharf-cli' }, {});
  await json('POST', '/oauth/device/approve', { user_code: code.user_code, orgId: user.orgId, approve: true }, h);
  const cliToken = (
    await json(
      'POST',
      '/oauth/token',
      { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: code.device_code, client_id: 'wharf-cli' },
      {},
    )
  ).access_token;
  const pat = (await json('POST', '/api/personal-access-tokens', { name: 'fuzz' }, h)).data.token;
  const patToRevoke = String((await json('POST', '/api/personal-access-tokens', { name: 'victim' }, h)).data.id);
  const bearer = { authorization: `Bearer ${pat}` };
  const session = (await json('POST', '/api/sandbox-sessions', { name: 'Fuzz' }, bearer)).data;
  const peer = (await json('POST', '/api/sandbox-sessions', { name: 'Peer' }, bearer)).data;
  const key = { authorization: `Bearer ${session.api_key}` };
  const sent = await json('POST', '/api/send-message', { to: peer.phone_number, text: 'hello' }, key);
  const lid = (await json('GET', `/api/lid-from-pn/${encodeURIComponent(peer.phone_number)}`, undefined, key)).data;
  const group = (await json('POST', '/api/groups', { name: 'Fuzz group', participants: [peer.phone_number] }, key)).data;
  const invite = (await json('GET', `/api/groups/${group.id}/invite-link`, undefined, key)).data;
  const created = await json('POST', '/api/apps', { name: 'Fuzz' }, h);
  const appToken = (await json('POST', '/api/tokens', { appId: created.id, name: 'fuzz' }, h)).token;
  const phase1 = await json('POST', '/api/files/upload', { appId: created.id, files: [{ name: 'a.txt', size: 2, type: 'text/plain' }] }, h);
  const put = await fetch(phase1.uploads[0].presignedUrl, { method: 'PUT', body: 'hi', headers: { 'content-type': 'text/plain' } });
  if (put.status !== 200) throw new Error(`fixture PUT: ${put.status}`);
  const done = await json(
    'POST',
    '/api/files/upload',
    { appId: created.id, action: 'complete', files: [{ key: phase1.uploads[0].key, name: 'a.txt', size: 2, type: 'text/plain' }] },
    h,
  );
  const invitation = await json('POST', `/api/orgs/${user.orgId}/invitations`, { email: 'invitee@example.test' }, h);
  return {
    user,
    cliToken,
    pat,
    patToRevoke,
    sessionKey: session.api_key,
    sessionId: session.id,
    appId: created.id,
    appToken,
    fileId: done.files[0].id,
    msgId: sent.data.msgId,
    peerPhone: peer.phone_number,
    peerLid: typeof lid === 'string' ? lid : (lid?.lid ?? '123456789@lid'),
    groupJid: group.id,
    inviteCode: typeof invite === 'string' ? invite.split('/').pop()! : String(invite?.inviteCode ?? invite?.code ?? 'AAAAAAAAAAAAAAAAAAAAAA'),
    invitationId: invitation.invitation.id,
  };
}

/** Rebuilds the fixture when an operation spent part of it (logged out, deleted, revoked). */
async function keepFixture(): Promise<void> {
  const checks = await Promise.all([
    app.request('GET', '/auth/session', { headers: fx.user.headers }),
    app.request('GET', '/api/cli/me', { headers: { authorization: `Bearer ${fx.cliToken}` } }),
    app.request('GET', `/api/whatsapp-sessions/${fx.sessionId}`, { headers: { authorization: `Bearer ${fx.pat}` } }),
    app.request('GET', '/api/status', { headers: { authorization: `Bearer ${fx.sessionKey}` } }),
    app.request('GET', '/api/files', { headers: { authorization: `Bearer ${fx.appToken}` } }),
  ]);
  if (checks.some((c) => c.status !== 200)) fx = await makeFixture();
}

function credentialFor(op: Operation): Record<string, string> {
  const scheme = op.security[0];
  switch (scheme) {
    case undefined:
      return {};
    case 'dashboardSession':
      return fx.user.headers;
    case 'cliToken':
      return { authorization: `Bearer ${fx.cliToken}` };
    case 'personalAccessToken':
      return { authorization: `Bearer ${fx.pat}` };
    case 'sessionApiKey':
      return { authorization: `Bearer ${fx.sessionKey}` };
    case 'appToken':
      return { authorization: `Bearer ${fx.appToken}` };
    default:
      throw new Error(`no credential for scheme ${scheme}`);
  }
}

function paramValue(path: string, name: string): string {
  if (path.startsWith('/api/orgs/')) return { org: fx.user.orgId, userId: fx.user.userId, id: fx.invitationId }[name] ?? 'x';
  if (path.startsWith('/api/messages/')) return String(fx.msgId);
  if (path.startsWith('/api/contacts/')) return fx.peerPhone;
  if (path.startsWith('/api/on-whatsapp/') || path.startsWith('/api/lid-from-pn/')) return fx.peerPhone;
  if (path.startsWith('/api/pn-from-lid/')) return fx.peerLid;
  if (path.startsWith('/api/personal-access-tokens/')) return fx.patToRevoke;
  if (path.startsWith('/api/groups/invite/')) return fx.inviteCode;
  if (path.startsWith('/api/groups/')) return fx.groupJid;
  if (path.startsWith('/api/dispatches/')) return '1';
  if (/sessions\//.test(path)) return String(fx.sessionId);
  return 'abc';
}

// ---------------------------------------------------------------------------------------------
// Values: a plausible one per field name, else one per type; and the mutations.

function plausible(name: string): Json | undefined {
  const byName: Record<string, () => Json> = {
    to: () => fx.peerPhone,
    text: () => 'hello',
    email: () => 'fuzz@example.test',
    password: () => 'not the password',
    appId: () => fx.appId,
    token: () => fx.appToken,
    tokenId: () => '00000000-0000-4000-8000-000000000000',
    fileId: () => fx.fileId,
    orgId: () => fx.user.orgId,
    phone_number: () => '+15550009999',
    from: () => '+15550008888',
    jid: () => fx.peerPhone,
    webhook_url: () => 'https://hooks.example.com/fuzz',
    proxy_url: () => 'http://proxy.example.com:3128',
    client_id: () => 'wharf-cli',
    grant_type: () => 'refresh_token',
    user_code: () => 'BCDF-GHJK',
    name: () => 'fuzz',
    participants: () => [fx.peerPhone],
    code: () => fx.inviteCode,
    key: () => ({ id: 'ABC', remoteJid: fx.peerPhone, fromMe: false }),
  };
  return Object.hasOwn(byName, name) ? byName[name]!() : undefined;
}

function sample(schema: Schema | undefined, name = '', depth = 0): Json {
  if (!schema || depth > 6) return 'x';
  const known = plausible(name);
  if (known !== undefined) return known;
  if (schema.const !== undefined) return schema.const;
  if (schema.enum?.length) return schema.enum[0];
  const branch = schema.oneOf?.[0] ?? schema.anyOf?.find((s) => s.type !== 'null');
  if (branch) return sample(branch, name, depth + 1);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'object': {
      const out: Record<string, Json> = {};
      for (const [key, value] of Object.entries(schema.properties ?? {})) if (schema.required?.includes(key)) out[key] = sample(value, key, depth + 1);
      return out;
    }
    case 'array':
      return [sample(schema.items, name, depth + 1)];
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    default:
      return 'x';
  }
}

/** A nested array `levels` deep, as JSON text. */
const nested = (levels: number) => `${'['.repeat(levels)}1${']'.repeat(levels)}`;
const HUGE = JSON.stringify('x'.repeat(200_000));

/** Replacements for one field, as JSON text (so unpaired surrogates and -0 survive). */
const FIELD_MUTATIONS = [
  'null',
  '"text"',
  '123',
  '-1',
  '-0',
  '1e308',
  '9007199254740993',
  '1.5',
  'true',
  '[]',
  '{}',
  '[1,"a",null]',
  HUGE,
  '"a\\u0000b"',
  '"\\u0000abc"',
  '"a\\u001b[2Jb"',
  '"\\ud800"',
  '"x\\udfffy"',
  nested(50),
];
/** Whole bodies, as JSON text. */
function bodyMutations(baseline: Json): string[] {
  const base = JSON.stringify(baseline);
  const withKeys = (keys: string[]) =>
    typeof baseline === 'object' && baseline && !Array.isArray(baseline)
      ? `${base.slice(0, -1)}${Object.keys(baseline).length ? ',' : ''}${keys.map((k) => `"${k}":1`).join(',')}}`
      : `{${keys.map((k) => `"${k}":1`).join(',')}}`;
  return [
    base,
    '{}',
    '[]',
    '"text"',
    '42',
    'null',
    'true',
    '{"a":',
    '{',
    'nul',
    '{"a":1}}',
    '\u0000',
    nested(200),
    `{"deep":${nested(63)}}`,
    withKeys(['__proto__']),
    withKeys(['constructor']),
    withKeys(['toString', 'hasOwnProperty', 'valueOf']),
    `[${base}]`,
    `{"x":${HUGE}}`,
  ];
}

/** `baseline` with the field at `path` replaced by `replacement` (JSON text). */
function withField(baseline: Json, path: (string | number)[], replacement: string): string {
  const marker = '"\u0001FUZZ\u0001"';
  const copy = structuredClone(baseline) as Record<string | number, Json>;
  let node: Record<string | number, Json> = copy;
  for (const step of path.slice(0, -1)) node = node[step] as Record<string | number, Json>;
  node[path.at(-1)!] = '\u0001FUZZ\u0001';
  return JSON.stringify(copy).replace(marker, replacement);
}

/** Field paths to mutate: top-level properties, and one level down in objects and arrays of objects. */
function fieldPaths(schema: Schema | undefined, baseline: Json): (string | number)[][] {
  const top = schema?.oneOf?.[0] ?? schema;
  if (!top?.properties || typeof baseline !== 'object' || !baseline || Array.isArray(baseline)) return [];
  const paths: (string | number)[][] = [];
  for (const [key, prop] of Object.entries(top.properties)) {
    paths.push([key]);
    const value = (baseline as Record<string, Json>)[key];
    if (prop.type === 'object' && value && typeof value === 'object' && !Array.isArray(value)) {
      for (const inner of Object.keys(value)) paths.push([key, inner]);
    }
    if (prop.type === 'array' && Array.isArray(value) && value[0] && typeof value[0] === 'object') {
      paths.push([key, 0]);
      for (const inner of Object.keys(value[0] as object)) paths.push([key, 0, inner]);
    }
  }
  return paths;
}

const QUERY_VALUES = [
  '',
  'abc',
  '-1',
  '0',
  '1.5',
  '1e999',
  '99999999999999999999',
  'x'.repeat(5000),
  '%00',
  '%00ab',
  'ab%00cd',
  '%1B%5B2J',
  '%ED%A0%80',
  '%ZZ',
  'true',
  '[]',
  '{}',
];
const PATH_VALUES = [
  '0',
  '-1',
  '99999999999999999999',
  'abc',
  '%00',
  '%ED%A0%80',
  'constructor',
  '__proto__',
  'toString',
  '..%2f..%2fetc',
  'a'.repeat(3000),
  '%F0%9F%92%A9',
];
const PROTO_QUERY = 'constructor=1&__proto__=1&toString=1&hasOwnProperty=1&valueOf=1';

// ---------------------------------------------------------------------------------------------
// Sending, and the envelope every answer must be in.

interface Sent {
  status: number;
  type: string;
  body: any;
  text: string;
}

async function send(op: Operation, path: string, init: { body?: string; type?: string; headers?: Record<string, string> }, label: string): Promise<Sent> {
  const headers: Record<string, string> = { ...init.headers };
  // fetch sends no body with GET (a body there is ignored by the server anyway).
  const payload = op.method === 'GET' ? undefined : init.body;
  if (payload !== undefined) headers['content-type'] = init.type ?? 'application/json';
  const res = await app.fetch(path, { method: op.method, headers, body: payload, redirect: 'manual' });
  // A stream of events (GET /api/session-events) does not end by itself: its answer is its status and type.
  const streaming = res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  if (streaming) await res.body?.cancel();
  const text = streaming ? '' : await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  tally.requests++;
  const sent = { status: res.status, type: res.headers.get('content-type') ?? '', body, text };
  const where = `${op.method} ${op.path} [${label}] -> ${res.status} ${text.slice(0, 300)}`;
  if (res.status >= 500) tally.fiveHundreds.push(where);
  checkEnvelope(op, sent, where);
  return sent;
}

function checkEnvelope(op: Operation, res: Sent, where: string): void {
  expect(res.status, where).toBeLessThan(500);
  if (res.status < 400) return;
  if (res.status === 429) {
    expect(res.body, where).toEqual({ message: expect.any(String), retry_after: expect.any(Number) });
    return;
  }
  if (op.html && res.type.startsWith('text/html')) return;
  expect(res.type, where).toMatch(/^application\/json/);
  if (op.envelope === 'messaging') {
    expect(res.body?.success, where).toBe(false);
    expect(typeof res.body?.message, where).toBe('string');
    if ('error' in res.body) expect(res.body.error, where).toBe(res.body.message);
    if ('errors' in res.body) for (const messages of Object.values(res.body.errors)) expect(Array.isArray(messages), where).toBe(true);
  } else {
    expect(typeof res.body?.error, where).toBe('string');
  }
}

function operations(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, spec] of Object.entries(methods)) {
      const content = spec.requestBody?.content?.['application/json'];
      const success = Object.values(spec.responses as Record<string, any>).find((r) => r.content)?.content;
      ops.push({
        method: method.toUpperCase(),
        path,
        security: (spec.security as Record<string, unknown>[]).map((s) => Object.keys(s)[0]!),
        envelope: spec['x-error-envelope'],
        html: Boolean(success?.['text/html']),
        body: content?.schema,
        query: (spec.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => ({ name: p.name, schema: p.schema })),
        params: (spec.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name),
      });
    }
  }
  return ops;
}

function pathOf(op: Operation, override?: { name: string; value: string }): string {
  return op.path.replace(/\{([A-Za-z0-9_]+)\}/g, (_m, name: string) =>
    override?.name === name ? override.value : encodeURIComponent(paramValue(op.path, name)),
  );
}

async function fuzz(op: Operation): Promise<void> {
  await keepFixture();
  const credential = credentialFor(op);
  const path = pathOf(op);
  const sendBody = op.method !== 'GET' && op.method !== 'DELETE' ? true : Boolean(op.body);

  // Without a credential, a route that needs one answers 401 whatever the body.
  if (op.security.length) {
    const res = await send(op, path, { body: '{"broken":', headers: { origin: app.url } }, 'no credential, malformed body');
    expect(res.status, `${op.method} ${op.path} without a credential`).toBe(401);
  }

  // The plain request, with a plausible body: it must succeed or be refused in the envelope too.
  await send(op, path, { headers: credential, ...(sendBody ? { body: JSON.stringify(op.body ? sample(op.body) : {}) } : {}) }, 'plausible');

  // Bodies.
  if (sendBody) {
    const baseline = op.body ? sample(op.body) : {};
    for (const [i, body] of bodyMutations(baseline).entries()) await send(op, path, { body, headers: credential }, `body ${i}`);
    for (const field of fieldPaths(op.body, baseline)) {
      for (const mutation of FIELD_MUTATIONS)
        await send(op, path, { body: withField(baseline, field, mutation), headers: credential }, `${field.join('.')} = ${mutation.slice(0, 20)}`);
    }
    const form = new URLSearchParams(
      Object.entries(baseline && typeof baseline === 'object' ? baseline : {}).map(([k, v]): [string, string] => [
        k,
        typeof v === 'string' ? v : JSON.stringify(v),
      ]),
    );
    await send(op, path, { body: form.toString(), type: 'application/x-www-form-urlencoded', headers: credential }, 'form');
    await send(op, path, { body: `${form.toString()}&${PROTO_QUERY}&%ZZ=%ZZ&&=`, type: 'application/x-www-form-urlencoded', headers: credential }, 'form, odd');
    await send(op, path, { body: 'x'.repeat(1_100_000), type: 'application/json', headers: credential }, 'over the body limit');
  }

  // Query parameters.
  for (const { name } of op.query) {
    for (const value of QUERY_VALUES) await send(op, `${path}?${encodeURIComponent(name)}=${value}`, { headers: credential }, `?${name}=${value.slice(0, 20)}`);
    await send(op, `${path}?${name}=1&${name}=2`, { headers: credential }, `?${name} repeated`);
  }
  await send(op, `${path}?${PROTO_QUERY}`, { headers: credential }, 'prototype-named query');

  // Path parameters.
  for (const name of op.params) {
    for (const value of PATH_VALUES)
      await send(
        op,
        pathOf(op, { name, value }),
        { headers: credential, ...(sendBody ? { body: JSON.stringify(op.body ? sample(op.body) : {}) } : {}) },
        `{${name}} = ${value.slice(0, 20)}`,
      );
  }
  tally.operations++;
}

describe('fuzzing every operation of the OpenAPI document', () => {
  it("answers every request below 500, in the operation's envelope, and stays healthy", async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    const ops = operations(doc);
    expect(ops.length).toBeGreaterThan(100);
    for (const op of ops) {
      expect(['plain', 'messaging'], `${op.method} ${op.path} names its envelope`).toContain(op.envelope);
      await fuzz(op);
    }
    expect(tally.operations).toBe(ops.length);
    expect(tally.fiveHundreds).toEqual([]);
    // Still healthy, and nothing was logged as a failed request.
    expect((await app.request('GET', '/healthz')).status).toBe(200);
    await keepFixture();
    expect((await app.request('GET', '/api/whatsapp-sessions', { headers: { authorization: `Bearer ${fx.pat}` } })).status).toBe(200);
    expect(app.logs.filter((l) => l.msg === 'request failed')).toEqual([]);
    console.log(`fuzz: ${tally.operations} operations, ${tally.requests} requests, ${tally.fiveHundreds.length} answers of 5xx`);
  }, 120_000);
});
