import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const saved = process.env.HOLDFAST_WORKER_ID;
afterEach(() => {
  if (saved === undefined) delete process.env.HOLDFAST_WORKER_ID;
  else process.env.HOLDFAST_WORKER_ID = saved;
});

describe("worker ids", () => {
  it("an empty HOLDFAST_WORKER_ID is no id: each runtime gets its own <host>:<pid>:<random>:<identity>, so two of them never share one", async () => {
    process.env.HOLDFAST_WORKER_ID = "";
    const store = join(tempDir(), "journal.db");
    const a = await openRuntime({ store });
    const b = await openRuntime({ store });
    try {
      expect(a.workerId).toMatch(/^.+:\d+:[0-9a-f]{6}:[0-9a-f]{12}\.\d+\.\d+$/);
      expect(b.workerId).not.toBe(a.workerId);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("HOLDFAST_WORKER_ID names the worker when no id is passed", async () => {
    process.env.HOLDFAST_WORKER_ID = "worker-7";
    const runtime = await openRuntime({ store: join(tempDir(), "journal.db") });
    try {
      expect(runtime.workerId).toBe("worker-7");
    } finally {
      await runtime.close();
    }
  });
});
