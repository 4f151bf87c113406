/** Progress goes to stderr, so `--json` output on stdout stays machine-readable. */
export const progress = (section: string, message: string): void => {
  process.stderr.write(`[bench ${section}] ${message}\n`);
};

/** A progress reporter that prints at most every `everyMs` (and always the last step). */
export const throttled = (section: string, what: string, everyMs = 2000) => {
  let last = 0;
  return (done: number, total: number): void => {
    const now = Date.now();
    if (done < total && now - last < everyMs) return;
    last = now;
    progress(section, `${what}: ${done.toLocaleString("en-US")} / ${total.toLocaleString("en-US")}`);
  };
};
