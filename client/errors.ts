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
