import type { RunHandle } from "../../../runtime/admit.js";
import type { ApprovalOutcome, ApprovalRequest } from "../../../runtime/approve.js";
import type { ControlOutcome, ControlRequest } from "../../../runtime/control.js";
import type { DecisionOutcome, DecisionRequest, RetryGrantRequest } from "../../../runtime/decide.js";
import type { DocumentState } from "../../../runtime/documents.js";
import type { ForkOptions } from "../../../runtime/fork.js";
import type { QueuedHandle, WithdrawOutcome } from "../../../runtime/queue.js";
import type { Schedules } from "../../../runtime/schedules.js";
import type { SignalOutcome, SignalRequest } from "../../../runtime/signal.js";
import type { Session } from "./security.js";

/** What the server changes the journal through: the same runtime paths as the CLI and the library. */
export interface OperatorPort {
  /** Schedules (decision 0060): made and changed by the operator runtime; ticked by workers. */
  readonly schedules: Schedules;
  decide(runId: string, request: DecisionRequest): Promise<DecisionOutcome>;
  grantRetry(runId: string, callId: string, request: RetryGrantRequest): Promise<DecisionOutcome>;
  withdraw(
    chatId: string,
    inputId: string,
    options: { readonly by: string; readonly reason?: string },
  ): Promise<WithdrawOutcome>;
  cancel(runId: string, request: ControlRequest): Promise<ControlOutcome>;
  pause(runId: string, request: ControlRequest): Promise<ControlOutcome>;
  signal(runId: string, name: string, payload: unknown, request: SignalRequest): Promise<SignalOutcome>;
  /** Record a fork (decision 0083); a worker with the agent continues it. */
  fork(runId: string, options: ForkOptions): Promise<RunHandle | QueuedHandle>;
  approve(runId: string, call: string | number, request: ApprovalRequest): Promise<ApprovalOutcome>;
  deny(runId: string, call: string | number, request: ApprovalRequest): Promise<ApprovalOutcome>;
  resume(
    runId: string,
    request: ControlRequest,
  ): Promise<ControlOutcome & { readonly result: Promise<unknown> }>;
  readonly documents: {
    replace(
      chatId: string,
      request: { readonly expectedRevision: number; readonly value: unknown; readonly by: string },
    ): Promise<DocumentState>;
  };
}

export type Auth = { readonly kind: "token" } | { readonly kind: "session"; readonly session: Session };

export type Env = { Variables: { auth: Auth | null } };
