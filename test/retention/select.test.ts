import { describe, expect, it } from "vitest";
import {
  parentRunOf,
  pruneOrder,
  type RetentionCandidate,
  selectForPruning,
} from "../../src/runtime/retention.js";

const DAY = 86_400_000;
const NOW = Date.parse("2025-06-30T12:00:00.000Z");

/** A finished run whose last event is `daysAgo` old, at `position`. */
const finished = (
  runId: string,
  position: number,
  daysAgo: number,
  chatId = `chat-${runId}`,
): RetentionCandidate => ({
  runId,
  chatId,
  active: false,
  version: 3,
  hash: "h".repeat(64),
  position,
  recordedAt: new Date(NOW - daysAgo * DAY).toISOString(),
});

const pruned = (candidates: RetentionCandidate[], keepRuns: number, keepDays: number) =>
  selectForPruning(candidates, { keepRuns, keepDays }, NOW).prune.map((c) => c.runId);

describe("which finished runs a retention policy removes", () => {
  it("the newest N finished runs are kept, newest by log position", () => {
    const runs = [finished("a", 10, 90), finished("b", 20, 90), finished("c", 30, 90), finished("d", 40, 90)];
    expect(pruned(runs, 2, 0)).toEqual(["b", "a"]);
    expect(selectForPruning(runs, { keepRuns: 2, keepDays: 0 }, NOW).kept).toBe(2);
  });

  it("a run finished within the window is kept however many newer runs there are", () => {
    const runs = [finished("old", 10, 40), finished("recent", 20, 5), finished("newest", 30, 1)];
    expect(pruned(runs, 0, 30)).toEqual(["old"]);
    expect(pruned(runs, 0, 0)).toEqual(["newest", "recent", "old"]);
  });

  it("active runs are never selected, whatever their age", () => {
    const runs = [{ ...finished("held", 10, 400), active: true }, finished("done", 20, 400)];
    expect(pruned(runs, 0, 0)).toEqual(["done"]);
  });

  it("a child run stays while its parent stays, and goes with it (grandchildren too)", () => {
    const parent = finished("p", 50, 90);
    const child = finished("c", 40, 90, "child:p/2");
    const grandchild = finished("g", 30, 90, "child:c/0");
    // The parent is the newest: kept, and so are its descendants.
    expect(pruned([parent, child, grandchild], 1, 0)).toEqual([]);
    expect(pruned([parent, child, grandchild], 0, 0)).toEqual(["p", "c", "g"]);
    // An active parent keeps its finished child.
    expect(pruned([{ ...parent, active: true }, child], 0, 0)).toEqual([]);
  });

  it("a child whose parent is already gone may go", () => {
    expect(pruned([finished("c", 40, 90, "child:gone/1")], 0, 0)).toEqual(["c"]);
  });

  it("a prune removes oldest first, a parent before its children even when they finished later", () => {
    const parent = finished("p", 50, 90);
    const child = finished("c", 60, 90, "child:p/2");
    const grandchild = finished("g", 30, 90, "child:c/0");
    const older = finished("o", 20, 90);
    const newer = finished("n", 70, 90);
    const order = pruneOrder([newer, child, parent, older, grandchild]).map((c) => c.runId);
    expect(order).toEqual(["o", "p", "c", "g", "n"]);
  });

  it("the parent of a child run is read from its chat: child:<runId>/<seq>", () => {
    expect(parentRunOf("child:mx1-ab/3")).toBe("mx1-ab");
    expect(parentRunOf("chat-1")).toBeNull();
  });

  it("a policy with a negative or fractional run count is refused", () => {
    expect(() => selectForPruning([], { keepRuns: -1, keepDays: 1 }, NOW)).toThrow(RangeError);
    expect(() => selectForPruning([], { keepRuns: 1.5, keepDays: 1 }, NOW)).toThrow(RangeError);
    expect(() => selectForPruning([], { keepRuns: 1, keepDays: -2 }, NOW)).toThrow(RangeError);
  });
});
