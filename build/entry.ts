/** Entry of the bundle and the single executable: run the command line. */
import { hideBin } from 'yargs/helpers';
import { run } from '../bin/wharf.ts';

run(hideBin(process.argv));
