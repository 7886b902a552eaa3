/**
 * The client commands of `wharf`: sign-in and identity (`login`, `logout`, `whoami`). They
 * talk to an instance over HTTP and never open a database.
 */
import type { Argv } from 'yargs';
import { type ClientArgs, clientFor, instanceOf, run } from './command-kit.ts';
import { credentialsPath, readCredentials, writeCredentials } from './credentials.ts';
import { login } from './login.ts';
import { print } from './output.ts';
import { addDispatchCommands } from './dispatches.ts';
import { addFileCommands } from './files.ts';
import { addMessagingCommands } from './messaging.ts';

export interface ClientCommandOptions {
  /**
   * The address of the server this machine's config describes (`server.public_url`, which
   * defaults to `http://<listen>`), read from the same --config / WHARF_CONFIG / WHARF_* the
   * server would read. Called only when nothing else names an instance.
   */
  localInstance(args: object): string;
}

export function addClientCommands(cli: Argv, options: ClientCommandOptions): void {
  cli
    // Every client command reads the local address the same way; a middleware hands it over
    // without threading it through each command (non-enumerable: never printed or validated).
    .middleware((argv) => {
      Object.defineProperty(argv, 'localInstance', { value: () => options.localInstance(argv), enumerable: false });
    })
    .option('instance', {
      type: 'string',
      describe: "Wharf instance URL for client commands (default: WHARF_INSTANCE, the last one signed in to, else this config's server.public_url)",
      global: true,
    })
    .option('org', { type: 'string', describe: 'Organization (id or slug) client commands act in (X-Service-Org)', global: true })
    .command(
      'login',
      'Sign in to an instance with the device flow',
      {},
      run<ClientArgs>(async (args) => {
        const instance = instanceOf(args);
        const me = await login({ instance, say: (line) => process.stderr.write(`${line}\n`) });
        print(args, `Signed in to ${instance} as ${me.email ?? me.userId} (organizations: ${me.orgs.map((o) => o.slug ?? o.id).join(', ') || 'none'})`, me);
      }),
    )
    .command(
      'logout',
      'Forget the sign-in to an instance',
      {},
      run<ClientArgs>(async (args) => {
        const instance = instanceOf(args);
        const file = readCredentials();
        const had = Object.hasOwn(file.instances, instance);
        delete file.instances[instance];
        if (file.current === instance) file.current = Object.keys(file.instances)[0] ?? null;
        writeCredentials(file);
        print(args, had ? `Signed out of ${instance}` : `Not signed in to ${instance}`, { instance, signedOut: had });
      }),
    )
    .command(
      'whoami',
      'Show the signed-in user and its organizations',
      {},
      run<ClientArgs>(async (args) => {
        const client = clientFor(args);
        const me = await client.request<{
          kind: string;
          userId: string;
          email: string | null;
          name: string | null;
          orgs: { id: string; slug: string | null; name: string }[];
        }>('GET', '/api/cli/me');
        print(
          args,
          `${me.email ?? me.userId}${me.name ? ` (${me.name})` : ''} on ${client.instance}\norganizations: ${me.orgs.map((o) => `${o.slug ?? o.id} (${o.name})`).join(', ') || 'none'}\ncredentials: ${credentialsPath()}`,
          me,
        );
      }),
    );
  addMessagingCommands(cli);
  addDispatchCommands(cli);
  addFileCommands(cli);
}
