import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/runtime/limiter.js";

/** A task that records when it starts and waits until it is let go. */
const gate = () => {
  const started: string[] = [];
  const release = new Map<string, () => void>();
  const task = (name: string) => () =>
    new Promise<string>((resolve) => {
      started.push(name);
      release.set(name, () => resolve(name));
    });
  const finish = async (name: string) => {
    release.get(name)!();
    // Let the finished task's continuation and the woken ones run.
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return { started, task, finish };
};

const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("Limiter", () => {
  it("runs at most `limit` tasks at once, started in arrival order", async () => {
    const limiter = new Limiter(2);
    const { started, task, finish } = gate();
    const all = ["a", "b", "c", "d"].map((n) => limiter.run(task(n)));
    await settle();
    expect(started).toEqual(["a", "b"]);
    await finish("b");
    expect(started).toEqual(["a", "b", "c"]);
    await finish("a");
    await finish("c");
    await finish("d");
    expect(await Promise.all(all)).toEqual(["a", "b", "c", "d"]);
    expect(limiter.peak).toBe(2);
  });

  it("keeps the weights running together within its budget, runs a task heavier than the budget alone, and lets nobody pass a task that waits", async () => {
    const limiter = new Limiter(10, 100);
    const { started, task, finish } = gate();
    const all = [
      limiter.run(task("a60"), 60),
      limiter.run(task("b30"), 30),
      limiter.run(task("c50"), 50), // 60 + 30 + 50 > 100: waits
      limiter.run(task("d5"), 5), // would fit, but arrives after c50: waits behind it
      limiter.run(task("e500"), 500), // heavier than the budget: runs alone
      limiter.run(task("f1"), 1),
    ];
    await settle();
    expect(started).toEqual(["a60", "b30"]);
    await finish("a60"); // 30 + 50 + 5 = 85: both start
    expect(started).toEqual(["a60", "b30", "c50", "d5"]);
    await finish("b30");
    await finish("c50");
    expect(started).toEqual(["a60", "b30", "c50", "d5"]); // e500 waits until it is alone
    await finish("d5");
    expect(started).toEqual(["a60", "b30", "c50", "d5", "e500"]);
    await finish("e500");
    expect(started.at(-1)).toBe("f1");
    await finish("f1");
    await Promise.all(all);
    expect(limiter.peakWeight).toBe(500);
    expect(limiter.peak).toBe(3);
  });

  it("gives a failed task's place and weight back to the next", async () => {
    const limiter = new Limiter(2, 10);
    const failing = limiter.run(async () => {
      throw new Error("no");
    }, 8);
    const next = limiter.run(async () => "next", 8);
    await expect(failing).rejects.toThrow("no");
    expect(await next).toBe("next");
    // Were the failed task's 8 still counted, a task of 2 could not run beside one of 8.
    const { started, task, finish } = gate();
    const both = [limiter.run(task("eight"), 8), limiter.run(task("two"), 2)];
    await settle();
    expect(started).toEqual(["eight", "two"]);
    await finish("eight");
    await finish("two");
    await Promise.all(both);
  });

  it("refuses a limit below one, a budget below zero and a weight that is not a finite number of at least zero", async () => {
    expect(() => new Limiter(0)).toThrow(RangeError);
    expect(() => new Limiter(Number.NaN)).toThrow(RangeError);
    expect(() => new Limiter(1, -1)).toThrow(RangeError);
    expect(() => new Limiter(1, Number.NaN)).toThrow(RangeError);
    const limiter = new Limiter(1, 10);
    await expect(limiter.run(async () => 1, Number.NaN)).rejects.toThrow(RangeError);
    await expect(limiter.run(async () => 1, -1)).rejects.toThrow(RangeError);
    // Nothing was taken by the refused tasks.
    expect(await limiter.run(async () => "ok", 10)).toBe("ok");
  });

  it("never runs more than its limit when a task arrives between a release and the start of the task it woke", async () => {
    // The arrival is queued a few microtasks after the release, so that for some offset it lands
    // after the slot is freed and before the woken task has started.
    for (let offset = 0; offset < 8; offset++) {
      const limiter = new Limiter(1);
      let running = 0;
      let peak = 0;
      const work = async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((resolve) => setImmediate(resolve));
        running--;
      };
      let release!: () => void;
      const first = limiter.run(
        () =>
          new Promise<void>((resolve) => {
            running++;
            peak = Math.max(peak, running);
            release = () => {
              running--;
              resolve();
            };
          }),
      );
      const woken = limiter.run(work);
      await settle();
      release();
      let arrival: Promise<void> = Promise.resolve();
      const late = new Promise<void>((done) => {
        const hop = (left: number): void => {
          if (left === 0) {
            arrival = limiter.run(work);
            done();
          } else queueMicrotask(() => hop(left - 1));
        };
        hop(offset);
      });
      await late;
      await Promise.all([first, woken, arrival]);
      expect(peak, `arrival ${offset} microtasks after the release`).toBe(1);
      expect(limiter.peak).toBe(1);
    }
  });
});
