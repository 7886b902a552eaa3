/** A failure to show the user of the command line: one line, exit code 1. */
export class ClientError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.name = 'ClientError';
    this.status = status;
  }
}

/** A command given wrong or missing flags, found after parsing: one line, exit code 2. */
export class UsageError extends ClientError {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The instance did not answer at all (refused, no such host, TLS): run() adds where its address came from. */
export class UnreachableError extends ClientError {
  readonly instance: string;
  constructor(instance: string, cause: unknown) {
    super(`cannot reach ${instance}: ${(cause as Error).message}`);
    this.name = 'UnreachableError';
    this.instance = instance;
  }
}
