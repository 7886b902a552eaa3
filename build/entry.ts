/** Entry of the bundle and the single executable: run the command line. */
import { hideBin } from 'yargs/helpers';
import { main } from '../bin/wharf.ts';

main(hideBin(process.argv)).catch((err: unknown) => {
  process.stderr.write(`wharf: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
