/**
 * The identity plugin: users, organizations and roles; dashboard sessions (`__session`);
 * command-line OAuth tokens; the principal resolvers for both; external OpenID Connect mode.
 */
import type { Context } from 'koa';
import { WharfError } from '../../core/errors.ts';
import { definePlugin, type PluginCommand } from '../../core/plugin.ts';
import { randomToken, sha256Hex } from '../../core/tokens.ts';
import { AccessTokens, JWT_SHAPE } from './access-tokens.ts';
import { identityConfig, type IdentityConfig, validateIdentity } from './config.ts';
import { crossSiteGuard, LoginThrottle } from './guards.ts';
import { Invitations } from './invitations.ts';
import { migrations } from './migrations.ts';
import { setupOidc } from './oidc.ts';
import { authRoutes } from './routes/auth.ts';
import { setupRoutes } from './routes/setup.ts';
import { declareSchemes } from './credentials.ts';
import { cliRoutes } from './routes/cli.ts';
import { orgRoutes } from './routes/orgs.ts';
import { devicePageRoutes } from './routes/device-page.ts';
import { oauthRoutes } from './routes/oauth.ts';
import { DeviceFlow } from './device.ts';
import { createIdentityService, createOrgIn } from './service.ts';
import { SESSION_COOKIE, LoginSessions } from './login-sessions.ts';
import { IdentityStore } from './store.ts';
import type { IdentityService, OAuthPrincipal, DashboardPrincipal, UserPrincipal } from './types.ts';

/** Applies `X-Service-Org` (id or slug) after a membership check: 403 alike for a stranger's and a missing organization. */
export async function withOrgOverride<P extends UserPrincipal>(principal: P, ctx: Context, store: IdentityStore): Promise<P> {
  const header = ctx.get('x-service-org').trim();
  if (!header) return principal;
  const org = await store.org(header);
  const role = org && (await store.role(principal.userId, org.id));
  if (!org || !role) throw new WharfError('forbidden', 'Not a member of that organization');
  return { ...principal, orgId: org.id, role };
}

const adminCommands: PluginCommand[] = [
  {
    group: 'admin',
    command: 'create-user',
    describe: 'Create a user (and with --org an organization it owns); works while the server runs',
    builder: (y) =>
      y
        .option('email', { type: 'string', demandOption: true, describe: 'Email address (unique)' })
        .option('password', { type: 'string', describe: 'Password (or --password-stdin)' })
        .option('password-stdin', { type: 'boolean', describe: 'Read the password from standard input' })
        .option('name', { type: 'string', describe: 'Display name' })
        .option('org', { type: 'string', describe: 'Also create an organization with this name, owned by the user' }),
    async handler(args, ctx) {
      const password = await passwordArg(args);
      const { data, config, plugins, close } = await ctx.open();
      try {
        const store = new IdentityStore(data);
        const service = await createIdentityService(store, plugins.identity as IdentityConfig);
        const record = await service.prepareUser({ email: String(args.email), password, name: args.name as string | undefined });
        const { user, org } = await store.transaction(async (tx) => {
          const u = await tx.insertUser(record);
          const o = typeof args.org === 'string' ? await createOrgIn(tx, { name: args.org, ownerId: u.id }) : undefined;
          return { user: u, org: o };
        });
        ctx.print(`created user ${user.email} (${user.id})${org ? `, owner of ${org.name} (${org.slug}, ${org.id})` : ''}`, {
          user,
          org: org ?? null,
          instance: config.server.public_url,
        });
      } finally {
        await close();
      }
    },
  },
  {
    group: 'admin',
    command: 'reset-password',
    describe: "Set a user's password and end all of its sessions",
    builder: (y) =>
      y
        .option('email', { type: 'string', demandOption: true })
        .option('password', { type: 'string', describe: 'New password (or --password-stdin)' })
        .option('password-stdin', { type: 'boolean', describe: 'Read the password from standard input' }),
    async handler(args, ctx) {
      const password = await passwordArg(args);
      const { data, plugins, close } = await ctx.open();
      try {
        const store = new IdentityStore(data);
        const service = await createIdentityService(store, plugins.identity as IdentityConfig);
        const user = (await store.credentialsByEmail(String(args.email)))?.user;
        if (!user) throw new WharfError('not_found', `no user with email ${String(args.email)}`);
        await service.setPassword(user.id, password);
        ctx.print(`password of ${user.email} changed; its sessions are ended`, { user });
      } finally {
        await close();
      }
    },
  },
];

async function passwordArg(args: Record<string, unknown>): Promise<string> {
  if (args.passwordStdin) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks)
      .toString('utf8')
      .replace(/\r?\n$/, '');
  }
  if (typeof args.password !== 'string') throw new WharfError('bad_request', 'give --password or --password-stdin');
  return args.password;
}

export default definePlugin({
  name: 'identity',
  description: 'Users, organizations, dashboard sessions, device-flow login for the CLI, external OIDC.',
  config: identityConfig,
  validate: validateIdentity,
  engines: ['sqlite', 'postgres'],
  migrations,
  commands: adminCommands,
  async setup({ config, core, data, keys, auth, api, log, every }) {
    const store = new IdentityStore(data);
    const identity = await createIdentityService(store, config);
    const loginSessions = new LoginSessions(store, keys, config, core);
    const throttle = new LoginThrottle(config);
    const accessTokens = new AccessTokens(keys, core.server.public_url, config.access_token_ttl_seconds);
    const publicOrigin = new URL(core.server.public_url).origin;

    // External OpenID Connect mode has its own resolvers and routes; everything below is built-in mode only.
    if (config.mode === 'oidc') return setupOidc({ config, core, store, identity, auth, api, log, orgOverride: withOrgOverride });
    declareSchemes(api, SESSION_COOKIE);

    auth.register({
      name: 'identity:session-cookie',
      source: { cookie: SESSION_COOKIE },
      async resolve(token, ctx) {
        const principal = await loginSessions.resolve(token, ctx);
        return principal && withOrgOverride(principal, ctx, store);
      },
    });
    auth.register({
      name: 'identity:cli-token',
      source: { bearer: (token) => JWT_SHAPE.test(token) },
      async resolve(token, ctx) {
        const claims = await accessTokens.verify(token);
        const user = claims && (await store.userById(claims.userId));
        if (!claims || !user) return null;
        const role = claims.orgId ? await store.role(user.id, claims.orgId) : undefined;
        const principal: OAuthPrincipal = {
          kind: 'oauth',
          userId: user.id,
          email: user.email,
          name: user.name,
          orgId: role ? claims.orgId : null,
          role: role ?? null,
        };
        return withOrgOverride(principal, ctx, store);
      },
    });

    const notices: string[] = [];
    if ((await store.countUsers()) === 0) {
      const token = randomToken(24);
      const ttl = config.setup_link_ttl_minutes;
      await store.newSetupToken(sha256Hex(token), new Date(Date.now() + ttl * 60_000).toISOString());
      const link = `${core.server.public_url}/setup?token=${token}`;
      notices.push(`No users yet. Open this link within ${ttl} minutes to create the first owner:`, `  ${link}`);
    }

    const deps = { api, store, identity, loginSessions, throttle, core };
    const invitations = new Invitations(store, { ttlDays: config.invitation_ttl_days });
    every('prune-sessions-and-invitations', 3_600_000, async () => {
      const now = new Date().toISOString();
      await store.pruneSessions(now, new Date(Date.now() - 86_400_000).toISOString());
      await invitations.prune();
    });

    const deviceFlow = new DeviceFlow({ db: data, store, accessTokens, config, publicUrl: core.server.public_url });

    return {
      service: identity satisfies IdentityService,
      notices,
      middleware: [
        {
          name: 'identity:cross-site-guard',
          priority: 'guards',
          fn: crossSiteGuard({ publicOrigin, cookieNames: [SESSION_COOKIE], formPaths: ['/auth/login', '/setup', '/device'] }),
        },
      ],
      routes: [
        authRoutes(deps),
        setupRoutes(deps, config.password_min_length),
        orgRoutes(api, store, identity, {
          invitations,
          activate: async (principal, orgId) => {
            if (principal.kind === 'session') await loginSessions.setActiveOrg(principal as DashboardPrincipal, orgId);
          },
        }),
        ...oauthRoutes(api, deviceFlow),
        devicePageRoutes({ ...deps, flow: deviceFlow }),
        cliRoutes(api, store, auth, () => ({
          instanceUrl: core.server.public_url,
          idpFapiUrl: core.server.public_url,
          oauthClientId: config.cli_client_id,
          minCliVersion: config.min_cli_version,
          configured: true,
        })),
      ],
    };
  },
});
