import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import type { DocumentRow } from "../../../../projections/index.js";
import {
  checkPlan,
  PLAN,
  PLAN_MAX_BYTES,
  PLAN_MAX_ITEMS,
  type PlanValue,
} from "../../../../runtime/documents.js";
import { DocumentConflict, InvalidInput } from "../../../../runtime/errors.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { dbFlag, openOperatorRuntime, operatorName, shellQuote } from "./decide.js";

export interface PlanOptions {
  readonly expectedRevision?: number;
  readonly file?: string;
  readonly by?: string;
  readonly db?: string;
  readonly json?: boolean;
}

const planLines = (value: PlanValue): string[] => {
  const width = Math.max(0, ...value.items.map((item) => item.id.length));
  return [
    value.title,
    ...(value.items.length === 0
      ? ["  (no items)"]
      : value.items.map((item) => `  [${item.done ? "x" : " "}] ${item.id.padEnd(width)}  ${item.text}`)),
  ];
};

/** A file can be refused before it is read in full: far beyond what a plan may hold. */
const readPlanFile = (file: string): unknown => {
  const path = resolve(file);
  let text: string;
  try {
    if (statSync(path).size > PLAN_MAX_BYTES * 16) {
      throw new CliError(
        ExitCode.failed,
        `${path} is ${statSync(path).size} bytes; a plan holds at most ${PLAN_MAX_BYTES} bytes encoded, nothing was written`,
        `keep the plan under ${PLAN_MAX_ITEMS} items and ${PLAN_MAX_BYTES / 1024} KiB`,
      );
    }
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(
      ExitCode.failed,
      `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      "pass --file with the path of a JSON file { title, items: [{ id, text, done }] }",
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError(
      ExitCode.failed,
      `${path} is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was written`,
      "the file holds one JSON object { title, items: [{ id, text, done }] }",
    );
  }
};

/** `holdfast plan <chatId>`: the chat's plan and its revision. */
const showPlan = async (chatId: string, options: PlanOptions, io: Io): Promise<number> =>
  withExistingJournal(options.db, async (journal) => {
    const row = await journal.projection<DocumentRow>("documents", `${chatId}/${PLAN}`);
    const revision = row?.revision ?? 0;
    const value = (row?.value ?? null) as PlanValue | null;
    if (options.json) {
      await io.out.json({ chatId, revision, value, conflicts: row?.conflicts ?? 0 });
      return ExitCode.ok;
    }
    if (value === null) {
      await io.out.lines([
        `chat ${chatId} has no plan yet (revision ${revision})`,
        `create one: holdfast plan ${shellQuote(chatId)} replace --expected-revision ${revision} --file plan.json${dbFlag(options.db)}`,
      ]);
      return ExitCode.ok;
    }
    await io.out.line(`plan of chat ${chatId}, revision ${revision}`);
    await io.out.lines(planLines(value).map((line) => `  ${line}`));
    if ((row?.conflicts ?? 0) > 0) {
      await io.out.line(`  (${row?.conflicts} stale replace(s) refused and recorded as document.conflicted)`);
    }
    await io.out.line(
      `edit: holdfast plan ${shellQuote(chatId)} replace --expected-revision ${revision} --file plan.json${dbFlag(options.db)}`,
    );
    return ExitCode.ok;
  });

/** `holdfast plan <chatId> replace`: replace the plan if it is still at the expected revision. */
const replacePlan = async (chatId: string, options: PlanOptions, io: Io): Promise<number> => {
  if (options.expectedRevision === undefined || options.file === undefined) {
    throw usageError(
      "plan replace needs --expected-revision R and --file PATH",
      `read the current revision with \`holdfast plan ${chatId}\``,
    );
  }
  const by = operatorName(options.by);
  const value = readPlanFile(options.file);
  try {
    checkPlan(value);
  } catch (error) {
    if (error instanceof InvalidInput) {
      throw new CliError(
        ExitCode.failed,
        `${error.message.replace(/\s*\n\s*/g, " ")}; nothing was written`,
        `a plan is { title, items: [{ id, text, done }] }, at most ${PLAN_MAX_ITEMS} items and ${PLAN_MAX_BYTES / 1024} KiB`,
      );
    }
    throw error;
  }
  const runtime = await openOperatorRuntime(options.db);
  try {
    const written = await runtime.documents
      .replace(chatId, { expectedRevision: options.expectedRevision, value, by })
      .catch((error: unknown) => {
        if (error instanceof DocumentConflict) {
          throw new CliError(
            ExitCode.failed,
            `the plan of chat ${chatId} is at revision ${error.actual}, not the expected ${error.expected}; nothing was replaced (the refusal is recorded as document.conflicted)`,
            `read it again (\`holdfast plan ${chatId}\`), apply your change to revision ${error.actual}, and replace with --expected-revision ${error.actual}`,
          );
        }
        throw error;
      });
    if (options.json) {
      await io.out.json({
        chatId,
        revision: written.revision,
        previousRevision: options.expectedRevision,
        by,
      });
      return ExitCode.ok;
    }
    await io.out.line(
      `replaced the plan of chat ${chatId}: revision ${options.expectedRevision} → ${written.revision}, by ${by}`,
    );
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};

/** `holdfast plan <chatId> [replace]`. */
export const planCommand = async (
  chatId: string,
  action: string | undefined,
  options: PlanOptions,
  io: Io,
): Promise<number> => {
  if (action === undefined) {
    if (options.expectedRevision !== undefined || options.file !== undefined) {
      throw usageError(
        "--expected-revision and --file go with `replace`",
        `holdfast plan ${chatId} replace --expected-revision R --file plan.json`,
      );
    }
    return showPlan(chatId, options, io);
  }
  if (action !== "replace") {
    throw usageError(
      `unknown plan action "${action}"; the only action is replace`,
      "see `holdfast plan --help`",
    );
  }
  return replacePlan(chatId, options, io);
};
