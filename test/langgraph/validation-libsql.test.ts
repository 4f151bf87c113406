import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { HoldfastSaver } from "../../src/langgraph.js";
import { validateSaver } from "./validation.js";

const dir = mkdtempSync(join(tmpdir(), "holdfast-langgraph-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let count = 0;

await validateSaver("HoldfastSaver (libSQL)", () =>
  HoldfastSaver.open({ store: join(dir, `journal-${++count}.db`) }),
);
