import { existsSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { openRuntime } from "../../src/index.js";
import { hostile, name, orHostile } from "../hostile.js";
import { FUZZ_SECRET, type GivenJournal, givenJournal, journalHead } from "../journal.js";
import { FuzzFailure, type FuzzTarget, PartialWrite } from "../target.js";

/** Refusals the journal records on purpose (a stale plan edit is written as `document.conflicted`). */
const RECORDED_REFUSALS = new Set(["DocumentConflict"]);

/** Which held run a call names: the one in doubt, the definitely failed one, or anything. */
const runRef = fc.oneof(fc.constantFrom("doubt", "flaky"), hostile, name);

type Call =
  | { readonly op: "submit"; readonly request: unknown }
  | { readonly op: "decide"; readonly run: unknown; readonly request: unknown; readonly current: boolean }
  | { readonly op: "grantRetry"; readonly run: unknown; readonly call: unknown; readonly request: unknown }
  | { readonly op: "replace"; readonly chatId: unknown; readonly request: unknown }
  | {
      readonly op: "open";
      readonly store: "journal" | "fresh" | "hostile";
      readonly options: unknown;
      readonly bad: unknown;
    };

const text = orHostile(
  fc.oneof(name, fc.string({ unit: "binary", maxLength: 64 }), fc.constant(FUZZ_SECRET)),
);
const kind = orHostile(
  fc.constantFrom("resume", "stop", "new-attempt", "confirmed-completed", "confirmed-not-completed"),
);
const count = orHostile(fc.oneof(fc.integer({ min: -3, max: 5 }), fc.double()));
const plan = orHostile(
  fc.record({
    title: text,
    items: orHostile(
      fc.array(fc.record({ id: text, text, done: orHostile(fc.boolean()) }), { maxLength: 4 }),
    ),
  }),
);
/** Every key, or some left out and an extra one; all with plausible or hostile values. */
const loose = <T extends Record<string, fc.Arbitrary<unknown>>>(fields: T) =>
  orHostile(
    fc.oneof(
      { arbitrary: fc.record(fields), weight: 3 },
      {
        arbitrary: fc.record({ ...fields, [FUZZ_SECRET.slice(0, 4)]: hostile }, { requiredKeys: [] }),
        weight: 1,
      },
    ),
  );

const call: fc.Arbitrary<Call> = fc.oneof(
  fc.record({
    op: fc.constant("submit" as const),
    request: loose({
      chatId: text,
      inputId: text,
      agent: orHostile(fc.constantFrom("ok", "doubt", "flaky", "missing", "constructor", "__proto__")),
      content: fc.oneof(fc.jsonValue(), hostile),
    }),
  }),
  fc.record({
    op: fc.constant("decide" as const),
    run: runRef,
    current: fc.boolean(),
    request: loose({
      basedOnVersion: count,
      decidedBy: text,
      decision: kind,
      note: text,
      result: fc.oneof(fc.jsonValue(), hostile),
      calls: orHostile(fc.dictionary(name, loose({ decision: kind, note: text, result: hostile }))),
    }),
  }),
  fc.record({
    op: fc.constant("grantRetry" as const),
    run: runRef,
    call: orHostile(fc.constantFrom("call", "other")),
    request: loose({ attempts: count, grantedBy: text, note: text }),
  }),
  fc.record({
    op: fc.constant("replace" as const),
    chatId: text,
    request: loose({ expectedRevision: count, value: plan, by: text }),
  }),
  fc.record({
    op: fc.constant("open" as const),
    // A hostile store is never a string: a string would name a file anywhere on this machine.
    store: fc.constantFrom("journal" as const, "fresh" as const, "hostile" as const),
    bad: hostile.filter((value) => typeof value !== "string"),
    options: loose({
      agents: orHostile(fc.array(hostile, { maxLength: 2 })),
      tools: orHostile(fc.array(hostile, { maxLength: 2 })),
      allowlist: orHostile(fc.dictionary(name, fc.string())),
      secrets: orHostile(fc.dictionary(name, orHostile(fc.string({ minLength: 4 })))),
      workerId: text,
      retry: loose({ maxAttempts: count }),
      recovery: loose({ onOpen: orHostile(fc.constant(false)), concurrency: count, leaseMs: count }),
      retention: orHostile(loose({ keepRuns: count, keepDays: count })),
    }),
  }),
);

const tagOf = (error: unknown): string | undefined => {
  const tag = (error as { _tag?: unknown } | null)?._tag;
  return typeof tag === "string" ? tag : undefined;
};

/**
 * The public API with hostile values on a real journal: every call resolves or rejects with a
 * tagged error, and after every refusal the journal's head digest is what it was.
 */
export const apiTarget: FuzzTarget = {
  name: "api",
  defaultRuns: 40_000,
  setup: async () => {
    const given: GivenJournal = await givenJournal();
    const openDb = join(given.dir, "open.db");
    (await openRuntime({ store: openDb, recovery: { onOpen: false } })).close();
    const openHead = journalHead(openDb);
    // Options that are not an object open the default journal: the one in the fuzz folder, never
    // the working folder's or HOLDFAST_STORE's.
    const savedCwd = process.cwd();
    const savedStore = process.env.HOLDFAST_STORE;
    process.chdir(given.dir);
    delete process.env.HOLDFAST_STORE;
    let fresh = 0;
    const { runtime } = given;
    const runOf = (ref: unknown) =>
      ref === "doubt" ? given.doubt : ref === "flaky" ? given.flaky : undefined;

    const perform = async (
      c: Call,
    ): Promise<{ readonly journal: "given" | "open" | "none"; readonly done: () => Promise<unknown> }> => {
      switch (c.op) {
        case "submit":
          return {
            journal: "given",
            done: async () => (await runtime.submit(c.request as never)).result,
          };
        case "decide": {
          const held = runOf(c.run);
          const runId = held?.runId ?? c.run;
          let request = c.request;
          if (
            c.current &&
            held &&
            request !== null &&
            typeof request === "object" &&
            !Array.isArray(request)
          ) {
            request = { ...request, basedOnVersion: (await runtime.events(held.runId)).length };
          }
          return {
            journal: "given",
            done: async () => (await runtime.decide(runId as never, request as never)).result,
          };
        }
        case "grantRetry": {
          const held = runOf(c.run);
          const callId = c.call === "call" ? (held?.callId ?? "x") : c.call;
          return {
            journal: "given",
            done: async () =>
              (await runtime.grantRetry((held?.runId ?? c.run) as never, callId as never, c.request as never))
                .result,
          };
        }
        case "replace":
          return {
            journal: "given",
            done: () => runtime.documents.replace(c.chatId as never, c.request as never),
          };
        case "open": {
          const store =
            c.store === "journal"
              ? openDb
              : c.store === "fresh"
                ? join(given.dir, `fresh-${++fresh}.db`)
                : c.bad;
          const options =
            c.options !== null && typeof c.options === "object" ? { ...c.options, store } : c.options;
          return {
            journal: c.store === "journal" ? "open" : "none",
            done: async () => {
              const opened = await openRuntime(options as never);
              await opened.close();
            },
          };
        }
      }
    };

    return {
      arbitrary: call,
      check: async (c: Call) => {
        const { journal, done } = await perform(c);
        const head = journal === "open" ? openHead : given.head;
        const before = await head();
        const freshPath = join(given.dir, `fresh-${fresh}.db`);
        try {
          await done();
          return `${c.op}: accepted`;
        } catch (error) {
          const tag = tagOf(error);
          if (tag === undefined)
            throw new FuzzFailure(
              `${c.op} rejected with an untagged error: ${String((error as Error)?.stack ?? error)}`,
            );
          if (RECORDED_REFUSALS.has(tag)) return `${c.op}: ${tag}`;
          if ((await head()) !== before) {
            throw new PartialWrite(`${c.op} was refused (${tag}) but the journal's head changed`);
          }
          if (c.op === "open" && c.store === "fresh" && existsSync(freshPath))
            throw new PartialWrite(`openRuntime was refused (${tag}) but created ${freshPath}`);
          return `${c.op}: ${tag}`;
        }
      },
      secretsLeft: given.secretsLeft,
      close: async () => {
        process.chdir(savedCwd);
        if (savedStore !== undefined) process.env.HOLDFAST_STORE = savedStore;
        openHead.close();
        await given.close();
      },
    };
  },
};
