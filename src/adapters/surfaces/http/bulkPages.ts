import { html } from "hono/html";
import type { RunRow } from "../../../projections/index.js";
import {
  BULK_ACTIONS,
  type BulkAction,
  type BulkResult,
  type BulkTarget,
  bulkPreview,
  MAX_BULK_RUNS,
  type RetryTargets,
} from "./bulk.js";
import { banner, type Html } from "./pages.js";
import type { Session } from "./security.js";

/** The selection as the form carries it: `runId@version` per checkbox (decision 0081). */
export const parseSelection = (
  values: ReadonlyArray<string>,
): { readonly targets: ReadonlyArray<BulkTarget>; readonly bad: ReadonlyArray<string> } => {
  const targets: BulkTarget[] = [];
  const bad: string[] = [];
  for (const value of values) {
    const at = value.lastIndexOf("@");
    const version = value.slice(at + 1);
    if (at <= 0 || !/^\d+$/.test(version)) bad.push(value);
    else targets.push({ runId: value.slice(0, at), basedOnVersion: Number(version) });
  }
  return { targets, bad };
};

const runLink = (runId: string): Html =>
  html`<a class="mono" href="/runs/${encodeURIComponent(runId)}">${runId}</a>`;

/**
 * The one confirm page of a bulk action: each run, the version it was selected at, where it stands
 * now and what the action will do to it — before the click. Nothing is written until confirmed.
 */
export const bulkConfirmPage = (
  session: Session,
  action: BulkAction,
  selection: ReadonlyArray<{
    readonly target: BulkTarget;
    readonly row: RunRow | null;
    readonly version: number | undefined;
    /** With `retry`: the failed calls its hold names, and its calls in doubt. */
    readonly retry?: RetryTargets;
  }>,
  note: string,
  problem?: string,
): Html => {
  const previews = selection.map(({ target, row, version, retry }) => ({
    target,
    row,
    version,
    preview: bulkPreview(action, target, row, version, retry),
  }));
  const acting = previews.filter((p) => p.preview.ok).length;
  return html`<h1>Confirm: ${BULK_ACTIONS[action].toLowerCase()} (${selection.length} run${selection.length === 1 ? "" : "s"})</h1>
    ${problem ? banner("error", `${problem} Nothing was written.`) : ""}
    <p>Each run is acted on alone, on the version it had when you selected it: a run that changed since is refused alone (nothing written for it) and the others go on (at most ${MAX_BULK_RUNS} runs at once).${acting < selection.length ? ` As things stand, ${selection.length - acting} of them would be refused.` : ""}</p>
    <table id="bulk-confirm">
      <thead><tr><th scope="col">Run</th><th scope="col">Selected at</th><th scope="col">Now</th><th scope="col">What will happen</th></tr></thead>
      <tbody>
        ${previews.map(
          ({
            target,
            row,
            version,
            preview,
          }) => html`<tr data-run="${target.runId}" data-ok="${preview.ok ? "yes" : "no"}">
            <td>${runLink(target.runId)}</td>
            <td>version ${target.basedOnVersion}</td>
            <td>${row ? `${row.status}, version ${version ?? "?"}` : "no such run"}</td>
            <td class="${preview.ok ? "" : "refused"}">${preview.text}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    <form method="post" action="/bulk" class="card">
      <input type="hidden" name="_csrf" value="${session.csrf}" />
      <input type="hidden" name="confirm" value="yes" />
      <input type="hidden" name="action" value="${action}" />
      ${selection.map(({ target }) => html`<input type="hidden" name="run" value="${target.runId}@${target.basedOnVersion}" />`)}
      <label class="field" for="bulk-note">Why (required; recorded with each run's action)</label>
      <textarea id="bulk-note" name="note" required>${note}</textarea>
      <p class="muted">Recorded as decided by ${session.name}, once per run.</p>
      <p><button type="submit" id="confirm">Confirm and record for ${selection.length} run${selection.length === 1 ? "" : "s"}</button> <a class="button secondary" href="/">Back</a></p>
    </form>`;
};

/** What became of each run of a bulk action, and what happens next for each. */
export const bulkResultsPage = (action: BulkAction, results: ReadonlyArray<BulkResult>): Html => {
  const done = results.filter((r) => r.done).length;
  const refused = results.length - done;
  return html`<h1>${BULK_ACTIONS[action]}: ${done} recorded${refused > 0 ? `, ${refused} refused` : ""}</h1>
    ${banner(
      refused === 0 ? "ok" : "stale",
      html`<span id="bulk-summary">${done} of ${results.length} recorded, each on its own version.${refused > 0 ? ` ${refused} refused: nothing was written for ${refused === 1 ? "it" : "them"}; look at ${refused === 1 ? "it" : "them"} again.` : ""}</span>`,
    )}
    <table id="bulk-results">
      <thead><tr><th scope="col">Run</th><th scope="col">Result</th><th scope="col">Version</th><th scope="col">What happens next</th></tr></thead>
      <tbody>
        ${results.map(
          (r) => html`<tr data-run="${r.runId}" data-done="${r.done ? "yes" : "no"}" data-code="${r.code}">
            <td>${runLink(r.runId)}</td>
            <td class="result">${r.done ? "Recorded" : "Refused"}: ${r.message}</td>
            <td>${r.version === null ? html`<span class="muted">unchanged</span>` : `${r.basedOnVersion} → ${r.version}`}</td>
            <td class="next">${r.next ? r.next.text : r.done ? "" : "nothing: the run is as it was"}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    <p><a href="/">Back to the runs</a></p>`;
};
