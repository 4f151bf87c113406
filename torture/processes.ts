import { readdirSync, readFileSync } from "node:fs";

/** Processes below `root` (children, grandchildren, …) whose command name starts with `name`, from /proc. */
export const descendantsNamed = (root: number, name: string): number[] => {
  const parents = new Map<number, number>();
  const names = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      parents.set(Number(entry), Number(stat.slice(close + 2).split(" ")[1]));
      names.set(Number(entry), stat.slice(stat.indexOf("(") + 1, close));
    } catch {
      // Gone since the listing.
    }
  }
  const below = (pid: number): boolean => {
    for (let at = parents.get(pid); at !== undefined && at > 1; at = parents.get(at))
      if (at === root) return true;
    return false;
  };
  return [...parents.keys()].filter((pid) => below(pid) && names.get(pid)?.startsWith(name));
};

/**
 * The browser processes below `root`: Chromium's own (main) process, not the shell script that
 * starts it (Debian's /usr/bin/chromium-headless-shell) nor its zygotes, renderers and utilities
 * (`--type=…`), which end with it.
 */
export const chromiumBrowsers = (root: number): number[] =>
  descendantsNamed(root, "chromium").filter((pid) => {
    try {
      // Chromium rewrites its helpers' command lines (one string, spaces): look for the flag anywhere.
      const line = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      return !/^(\S*\/)?(ba|da)?sh\0/.test(line) && !line.includes("--type=");
    } catch {
      return false;
    }
  });
