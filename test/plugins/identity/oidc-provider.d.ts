/** The little of npm `oidc-provider` (which ships no types) that the OIDC tests use. */
declare module 'oidc-provider' {
  import type { RequestListener } from 'node:http';

  export class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    readonly issuer: string;
    callback(): RequestListener;
  }
  export const errors: {
    InvalidTarget: new (description?: string) => Error;
  };
  export default Provider;
}
