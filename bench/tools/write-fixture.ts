import { writeRecoveryFixture } from "../fixtures.js";

/**
 * `npx tsx bench/tools/write-fixture.ts <journal> [events]`: write the bench's filler log (finished
 * runs, ~1M events by default) to a journal file, to profile the audit or recovery on it by hand.
 */
const path = process.argv[2];
if (!path) throw new Error("usage: write-fixture.ts <journal file> [events]");
const events = Number(process.argv[3] ?? 1_000_000);
const fixture = await writeRecoveryFixture(path, {
  interrupted: 0,
  fillerEvents: events,
  isHeld: () => false,
  onProgress: (done, total) => process.stderr.write(`\r${done} / ${total}`),
});
process.stderr.write("\n");
process.stdout.write(`${JSON.stringify(fixture)}\n`);
