import type { AnyAgentDef } from "./define.js";

/** `name@version`, as `run.admitted` records an agent and the runtime registry lists it. */
export const agentRef = (agent: { readonly name: string; readonly version: string }): string =>
  `${agent.name}@${agent.version}`;

/** The name and version of a `name@version` reference (the version after the last `@`). */
export const parseAgentRef = (ref: string): { readonly name: string; readonly version: string } => {
  const at = ref.lastIndexOf("@");
  return at > 0 ? { name: ref.slice(0, at), version: ref.slice(at + 1) } : { name: ref, version: "" };
};

/**
 * The agents a runtime was given, by name and version (decision 0062): several versions of one
 * agent may be registered side by side; a run is executed only by the version that admitted it, and
 * new inputs take the newest version — the one registered last in `openRuntime({ agents })` — unless
 * they name one. The same `name@version` twice is refused.
 */
export class AgentRegistry {
  /** Name → its versions in registration order (the last is the newest). */
  private readonly byName = new Map<string, AnyAgentDef[]>();

  constructor(agents: ReadonlyArray<AnyAgentDef>) {
    for (const agent of agents) {
      const versions = this.byName.get(agent.name) ?? [];
      if (versions.some((v) => v.version === agent.version))
        throw new TypeError(
          `agent "${agentRef(agent)}" is registered twice; each version of an agent is registered once (registered versions of "${agent.name}": ${versions.map((v) => v.version).join(", ")})`,
        );
      versions.push(agent);
      this.byName.set(agent.name, versions);
    }
  }

  /** Whether some version of the agent is registered. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The exact version, or undefined when this runtime does not have it. */
  get(name: string, version: string): AnyAgentDef | undefined {
    return this.byName.get(name)?.find((agent) => agent.version === version);
  }

  /** The agent a `name@version` reference names, if registered here. */
  ofRef(ref: string): AnyAgentDef | undefined {
    const { name, version } = parseAgentRef(ref);
    return this.get(name, version);
  }

  /** The newest registered version of the agent: the one registered last. */
  newest(name: string): AnyAgentDef | undefined {
    return this.byName.get(name)?.at(-1);
  }

  /** The registered versions of the agent, oldest first (empty when none). */
  versions(name: string): ReadonlyArray<string> {
    return (this.byName.get(name) ?? []).map((agent) => agent.version);
  }

  /** The registered agent names, once each. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** Every registered agent as `name@version`, in registration order per name. */
  refs(): string[] {
    return [...this.byName.values()].flatMap((versions) => versions.map(agentRef));
  }

  /** How many agent versions are registered. */
  get size(): number {
    let n = 0;
    for (const versions of this.byName.values()) n += versions.length;
    return n;
  }
}
