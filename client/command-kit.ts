/**
 * What every client command shares: its global arguments, the instance it talks to, and the
 * runner that turns a failure into one line and an exit code. Apart from commands.ts, which
 * registers the commands, so a command module never imports the module that imports it.
 */
import { normalizeInstance, readCredentials } from './credentials.ts';
import { UsageError } from './errors.ts';
import { Client, ClientError } from './http.ts';
import { warn } from './output.ts';

export interface ClientArgs {
  instance?: string;
  org?: string;
  json?: boolean;
  /** The local server's own address (set by addClientCommands; not an option). */
  localInstance?: () => string;
}

/**
 * The instance a command talks to: --instance, WHARF_INSTANCE, the last one signed in to, else
 * the local server from the config, so the first commands after `npm start` need no flag.
 */
export function instanceOf(args: ClientArgs): string {
  const chosen = args.instance ?? process.env.WHARF_INSTANCE ?? readCredentials().current ?? args.localInstance?.();
  if (!chosen) throw new ClientError('no instance: give --instance URL (or sign in first with wharf login --instance URL)');
  return normalizeInstance(chosen);
}

export function clientFor(args: ClientArgs): Client {
  return new Client({ instance: instanceOf(args), org: args.org });
}

/** Runs a client command body, turning a ClientError into one line on stderr and exit 1 (a UsageError: exit 2). */
export function run<A extends ClientArgs>(fn: (args: A) => Promise<void>): (args: object) => Promise<void> {
  return async (args) => {
    try {
      await fn(args as A);
    } catch (err) {
      if (err instanceof UsageError) {
        warn(`wharf: ${err.message} (see wharf --help)`);
        process.exitCode = 2;
        return;
      }
      if (err instanceof ClientError) {
        warn(`wharf: ${err.message}`);
        process.exitCode = 1;
        return;
      }
      throw err;
    }
  };
}
