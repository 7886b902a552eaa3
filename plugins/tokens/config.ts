/** The tokens plugin's config: `[plugins.tokens]`. */
import { z } from 'zod';

export const tokensConfig = z.strictObject({
  last_used_flush_ms: z
    .int()
    .min(0)
    .max(1000)
    .default(250)
    .describe(
      'lastUsedAt is written in batches: at most this long after a validation, and at once before any read of the token list, in milliseconds (0 = written at every validation).',
    ),
});
