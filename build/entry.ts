/** Entry of the bundle and the single executable: run the command line. */
import { commandLine, run } from '../bin/wharf.ts';

run(commandLine());
