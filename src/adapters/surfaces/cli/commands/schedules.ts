import type { ScheduleRow } from "../../../../projections/index.js";
import { InvalidInput, ScheduleNotFound } from "../../../../runtime/errors.js";
import { listSchedules, type ScheduleSpec } from "../../../../runtime/schedules.js";
import { CliError, ExitCode, usageError } from "../CliError.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";
import { table } from "../table.js";
import { openOperatorRuntime, operatorName } from "./decide.js";

/** The options of `holdfast schedules` (and of its actions). */
export interface SchedulesOptions {
  readonly db?: string;
  readonly json?: boolean;
  readonly all?: boolean;
}

/** The options of `holdfast schedules add <id>`, as the command line gives them. */
export interface UpsertOptions extends SchedulesOptions {
  readonly cron?: string;
  readonly every?: string;
  readonly timezone?: string;
  readonly agent?: string;
  readonly agentVersion?: string;
  readonly input?: string;
  readonly overlap?: string;
  readonly catchUp?: string;
  readonly paused?: boolean;
  readonly by?: string;
}

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--every 2s`, `5m`, `1h`, `1d` or plain milliseconds. */
export const parseEvery = (value: string): number => {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match)
    throw usageError(
      `--every takes a period such as 30s, 5m, 1h, 1d or milliseconds, got "${value}"`,
      "holdfast schedules add ID --every 5m --agent NAME",
    );
  return Number(match[1]) * UNITS[match[2] ?? "ms"]!;
};

const when = (row: ScheduleRow): string =>
  row.cron !== null ? `cron ${row.cron} (${row.timezone})` : `every ${row.everyMs} ms`;

const lastTick = (row: ScheduleRow): string => {
  const tick = row.lastTick;
  if (!tick) return "";
  const run = tick.runId ? ` ${tick.runId}` : tick.activeRunId ? ` (run ${tick.activeRunId} active)` : "";
  return `${tick.tickAt} ${tick.outcome}${run}`;
};

/** `holdfast schedules`: every schedule, its next and last tick, paused or not. */
export const schedulesCommand = async (options: SchedulesOptions, io: Io): Promise<number> =>
  withExistingReader(options.db, async (journal) => {
    const rows = await listSchedules(journal, { includeDeleted: options.all === true });
    if (options.json) {
      await io.out.json({ schedules: rows });
      return ExitCode.ok;
    }
    if (rows.length === 0) {
      await io.out.line("no schedules; make one with: holdfast schedules add ID --every 5m --agent NAME");
      return ExitCode.ok;
    }
    await io.out.line(
      table(
        ["schedule", "when", "agent", "status", "next tick", "last tick", "overlap", "catch-up"],
        rows.map((row) => [
          row.scheduleId,
          when(row),
          row.agent,
          row.status,
          row.nextDueAt ?? "",
          lastTick(row),
          row.overlap,
          row.catchUp,
        ]),
      ),
    );
    return ExitCode.ok;
  });

const refused = (error: unknown): unknown => {
  if (error instanceof InvalidInput)
    return new CliError(
      ExitCode.failed,
      `${error.message}; nothing was written`,
      "holdfast schedules add ID (--cron 'MIN HOUR DOM MON DOW' [--timezone Europe/Berlin] | --every 5m) --agent NAME",
    );
  if (error instanceof ScheduleNotFound)
    return new CliError(
      ExitCode.failed,
      `no schedule ${error.scheduleId}; nothing was written`,
      "list them: holdfast schedules",
    );
  return error;
};

const parseInput = (input: string | undefined): unknown => {
  if (input === undefined) return null;
  try {
    return JSON.parse(input) as unknown;
  } catch (error) {
    throw usageError(
      `--input is not JSON: ${error instanceof Error ? error.message : String(error)}`,
      `pass the run input as JSON, e.g. --input '{"since":"yesterday"}'`,
    );
  }
};

const choice = <T extends string>(
  flag: string,
  value: string | undefined,
  allowed: ReadonlyArray<T>,
): T | undefined => {
  if (value === undefined) return undefined;
  if ((allowed as ReadonlyArray<string>).includes(value)) return value as T;
  throw usageError(
    `${flag} takes ${allowed.join(" or ")}, got "${value}"`,
    `holdfast schedules add ID … ${flag} ${allowed[0]}`,
  );
};

/** `holdfast schedules add <id>`: make or change a schedule (the same schedule again writes nothing). */
export const upsertCommand = async (scheduleId: string, options: UpsertOptions, io: Io): Promise<number> => {
  if (options.agent === undefined)
    throw usageError("schedules add needs --agent", "holdfast schedules add ID --every 5m --agent NAME");
  const spec: ScheduleSpec = {
    id: scheduleId,
    agent: options.agent,
    ...(options.agentVersion === undefined ? {} : { agentVersion: options.agentVersion }),
    input: parseInput(options.input),
    ...(options.cron === undefined ? {} : { cron: options.cron }),
    ...(options.every === undefined ? {} : { everyMs: parseEvery(options.every) }),
    ...(options.timezone === undefined ? {} : { timezone: options.timezone }),
    overlap: choice("--overlap", options.overlap, ["skip", "queue"] as const),
    catchUp: choice("--catch-up", options.catchUp, ["latest", "none"] as const),
    ...(options.paused ? { paused: true } : {}),
    by: operatorName(options.by),
  };
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime.schedules.upsert(spec).catch((error: unknown) => {
      throw refused(error);
    });
    if (options.json) {
      await io.out.json(outcome);
      return ExitCode.ok;
    }
    const row = outcome.schedule;
    await io.out.line(
      outcome.changed
        ? `schedule ${row.scheduleId}: ${when(row)}, agent ${row.agent}, ${row.status}; next tick ${row.nextDueAt ?? "none (paused)"}`
        : `schedule ${row.scheduleId} is already so; nothing was written (next tick ${row.nextDueAt ?? "none (paused)"})`,
    );
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};

/** `holdfast schedules pause|resume|delete <id>`. */
export const changeCommand = async (
  action: "pause" | "resume" | "delete",
  scheduleId: string,
  options: SchedulesOptions & { readonly by?: string },
  io: Io,
): Promise<number> => {
  const by = operatorName(options.by);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime.schedules[action](scheduleId, { by }).catch((error: unknown) => {
      throw refused(error);
    });
    if (options.json) {
      await io.out.json(outcome);
      return ExitCode.ok;
    }
    const row = outcome.schedule;
    const past = { pause: "paused", resume: "resumed", delete: "deleted" }[action];
    await io.out.line(
      outcome.changed
        ? `schedule ${row.scheduleId} ${past} by ${by}${row.nextDueAt ? `; next tick ${row.nextDueAt}` : ""}`
        : `schedule ${row.scheduleId} is already ${row.status === "active" ? "active" : row.status}; nothing was written`,
    );
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};
