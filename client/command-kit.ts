/**
 * What every client command shares: its global arguments, the instance it talks to, and the
 * runner that turns a failure into one line and an exit code. Apart from commands.ts, which
 * registers the commands, so a command module never imports the module that imports it.
 */
import { normalizeInstance, readCredentials } from './credentials.ts';
import { UnreachableError, UsageError } from './errors.ts';
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
  const chosen = chooseInstance(args).url;
  if (!chosen) throw new ClientError('no instance: give --instance URL (or sign in first with wharf login --instance URL)');
  return normalizeInstance(chosen);
}

/** instanceOf's choice and where it came from, said in the error when that instance does not answer. */
function chooseInstance(args: ClientArgs): { url: string | undefined; from: string | undefined } {
  if (args.instance) return { url: args.instance, from: undefined };
  if (process.env.WHARF_INSTANCE) return { url: process.env.WHARF_INSTANCE, from: 'WHARF_INSTANCE' };
  const current = readCredentials().current;
  if (current) return { url: current, from: 'the last instance signed in to' };
  return { url: args.localInstance?.(), from: "this config's server address (server.public_url, else server.listen)" };
}

/** " (tried ...; ...)" after an unreachable instance the user did not name, so they know why it was that one. */
function unreachableHint(args: ClientArgs, err: UnreachableError): string {
  const { url, from } = chooseInstance(args);
  if (!from || !url || normalizeInstance(url) !== err.instance) return '';
  return ` (tried ${from}; choose another with --instance URL)`;
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
        warn(`wharf: ${err.message}${err instanceof UnreachableError ? unreachableHint(args as A, err) : ''}`);
        process.exitCode = 1;
        return;
      }
      throw err;
    }
  };
}
