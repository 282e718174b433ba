import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import { buildInfo } from '../telemetry/build-info.js';
import type { AgentSession } from './agent-sessions.repository.js';
import { AgentToolCatalogue } from './agent-tool-catalogue.js';
import { AgentToolRunner } from './agent-tool-runner.js';
import type { Progress } from './tool-calls.js';

const INSTRUCTIONS =
  "Tools of cws-connect: each acts in the Contract Workflow Service as the user this session was made for, with that user's permissions. A tool error says what to do next (connect, wait, or fix the arguments).";

/**
 * The request's agent session, as the AuthInfo the SDK hands every handler of the request (`extra.authInfo`), the
 * way its own bearer middleware passes a verified token: the call carries its caller, and no handler looks it up.
 */
export class AgentAuth implements AuthInfo {
  readonly clientId: string;
  readonly scopes: string[];

  constructor(
    readonly token: string,
    readonly session: AgentSession,
    /** The HTTP request's id, for the audit row. */
    readonly requestId: string,
  ) {
    this.clientId = session.id;
    this.scopes = session.tools;
  }
}

function callerOf(auth: AuthInfo | undefined): AgentAuth {
  // Every call reaches a server through the door, which authenticated it: nothing else connects to one.
  if (auth instanceof AgentAuth) return auth;
  throw new McpError(ErrorCode.InternalError, 'The call carries no agent session.');
}

/** Sends notifications/progress for the request's progress token, or null when it carries none. */
function progressOf(token: string | number | undefined, send: (notification: ServerNotification) => Promise<void>): Progress | null {
  if (token === undefined) return null;
  return (progress, total, message) =>
    send({ method: 'notifications/progress', params: { progressToken: token, progress, total, message } });
}

/**
 * The SDK's servers of this service's tools: tools/list from the catalogue (one frozen list per grant), tools/call
 * through the runner (the grant, the arguments, the call, its span and audit row); the SDK answers ping and
 * initialize itself. The door connects one to its plain calls' transport and makes one per other request.
 */
@Injectable()
export class McpToolServers {
  private readonly version = buildInfo().version;
  /** One for every server: the SDK's server would otherwise build a JSON Schema compiler per request (measured: bench/agents.ts). */
  private readonly validator = new AjvJsonSchemaValidator();

  constructor(
    private readonly catalogue: AgentToolCatalogue,
    private readonly runner: AgentToolRunner,
  ) {}

  create(): Server {
    const server = new Server(
      { name: 'cws-connect', version: this.version },
      { capabilities: { tools: { listChanged: false }, logging: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator: this.validator },
    );
    server.setRequestHandler(ListToolsRequestSchema, (_request, extra) => this.catalogue.listFor(callerOf(extra.authInfo).session.tools));
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const caller = callerOf(extra.authInfo);
      return this.runner.run(caller.session, request.params.name, request.params.arguments, {
        requestId: caller.requestId,
        // Aborted when the caller leaves: the plain transport cancels the call, a request's own server closes.
        signal: extra.signal,
        progress: progressOf(request.params._meta?.progressToken, extra.sendNotification),
      });
    });
    return server;
  }
}
