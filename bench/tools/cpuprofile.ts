import { readFileSync } from "node:fs";
import { type CpuProfile, summarizeProfile } from "../lib/cpuprofile.js";

/**
 * Summarise a `.cpuprofile` written by `node --cpu-prof` or by bench/tools/profile.ts:
 *
 *   npx tsx bench/tools/cpuprofile.ts <file.cpuprofile> [--top 25] [--focus <function name>]
 *
 * `--focus` keeps only the samples whose stack holds that function (e.g. `flush`, `recover`).
 */
let file: string | undefined;
let top = 25;
let focus: string | undefined;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--top") top = Number(argv[++i]);
  else if (argv[i] === "--focus") focus = argv[++i];
  else file = argv[i];
}
if (!file) {
  process.stderr.write("usage: tsx bench/tools/cpuprofile.ts <file.cpuprofile> [--top N] [--focus name]\n");
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
process.stdout.write(`${file}: ${summarizeProfile(profile, { top, ...(focus ? { focus } : {}) })}`);
