import { Injectable } from '@nestjs/common';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { AppError } from '../common/app-error.js';
import { DEFAULT_GROUPS, TOOL_GROUPS, toolsFromDocument, type AgentTool, type SkippedOperation, type ToolGroup } from './agent-tools.js';
import { composedTools } from './composed-tools.js';
import { recordTools } from './record-tools.js';

/**
 * The tools of this service, made once at start from the OpenAPI document (`load`, from service.ts) and answered
 * from memory: the list a session sees (its grant, filtered once per grant), and each tool's argument validator.
 */
@Injectable()
export class AgentToolCatalogue {
  private all: AgentTool[] = [];
  private byName = new Map<string, AgentTool>();
  /** Each tool's argument validator, compiled at its first call (compiling every one at start cost ~50 ms of it). */
  private validators = new Map<string, ValidateFunction>();
  private ajv: Ajv2020 | null = null;
  private lists = new Map<string, Readonly<{ tools: Array<AgentTool['definition']> }>>();
  skipped: SkippedOperation[] = [];

  load(document: Record<string, unknown>): void {
    const { tools, skipped } = toolsFromDocument(document);
    const outputs = new Map(tools.map((t) => [t.name, t.definition.outputSchema]));
    this.all = [...tools, ...composedTools((name) => outputs.get(name)), ...recordTools()];
    this.skipped = skipped;
    this.byName = new Map(this.all.map((t) => [t.name, t]));
    this.validators.clear();
    this.lists.clear();
  }

  tools(): readonly AgentTool[] {
    return this.all;
  }

  get(name: string): AgentTool | undefined {
    return this.byName.get(name);
  }

  /** The tools a session asks for (names, or the groups read, write, admin; default read and write), in catalogue order. */
  grant(asked: readonly string[] | undefined): string[] {
    const wanted = new Set<string>();
    for (const entry of asked ?? DEFAULT_GROUPS) {
      if ((TOOL_GROUPS as readonly string[]).includes(entry)) {
        for (const t of this.all) if (t.group === (entry as ToolGroup)) wanted.add(t.name);
      } else if (this.byName.has(entry)) {
        wanted.add(entry);
      } else {
        throw new AppError(
          'validation_failed',
          `tools: "${entry.slice(0, 100)}" is neither a tool nor a group (read, write, admin); GET /docs-json lists the operations.`,
        );
      }
    }
    return this.all.filter((t) => wanted.has(t.name)).map((t) => t.name);
  }

  /**
   * The tools/list answer of a grant, made once per distinct grant, frozen: it never changes, so the door's
   * transport writes it from its JSON kept once (mcp-json-transport.ts).
   */
  listFor(granted: readonly string[]): Readonly<{ tools: Array<AgentTool['definition']> }> {
    const key = granted.join(',');
    let list = this.lists.get(key);
    if (list === undefined) {
      const names = new Set(granted);
      list = Object.freeze({ tools: this.all.filter((t) => names.has(t.name)).map((t) => t.definition) });
      if (this.lists.size >= 1000) this.lists.clear();
      this.lists.set(key, list);
    }
    return list;
  }

  private validatorOf(name: string): ValidateFunction | null {
    let validate = this.validators.get(name);
    if (validate === undefined) {
      const tool = this.byName.get(name);
      if (tool === undefined) return null;
      this.ajv ??= new Ajv2020({ strict: false, allErrors: true });
      validate = this.ajv.compile(tool.definition.inputSchema);
      this.validators.set(name, validate);
    }
    return validate;
  }

  /** Null when the arguments fit the tool's input schema, else what is wrong. */
  check(name: string, args: unknown): string | null {
    const validate = this.validatorOf(name);
    if (validate === null || validate(args)) return null;
    return (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || 'arguments'} ${e.message ?? 'is not valid'}`)
      .join('; ');
  }
}
