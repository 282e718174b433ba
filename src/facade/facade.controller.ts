import { All, Controller, Get, Param, Patch, Post, Req, Res } from '@nestjs/common';
import { ApiParam, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { AdminRoute, StreamedBody, UpstreamAnswer, UserRoute } from './facade-docs.js';
import { FacadeService } from './facade.service.js';

/**
 * The upstream's endpoints under /v1/tenants/{tenantId}, called with the right token (API.md section 7).
 * Bodies stream both ways (no body parser runs on these paths: app.factory STREAMED_PATHS).
 * POST/GET /webhooks belong to the webhooks module (provisioning, API.md section 8).
 */
@ApiTags('facade')
@Controller('v1/tenants/:tenantId')
export class FacadeController {
  constructor(private readonly facade: FacadeService) {}

  @Get('workflows')
  @UserRoute('List the workflows the user may see', 'GET /workflows')
  @UpstreamAnswer(200, 'The workflows (query string passed through untouched); each carries versionNumber, lastModified and Author.')
  listWorkflows(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'same', route: 'user' });
  }

  @Post('workflows')
  @UserRoute('Launch a workflow (the user is its creator)', 'POST /workflows')
  @StreamedBody('application/json', 'multipart/form-data')
  @UpstreamAnswer(201, 'The new workflow.')
  launch(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'same', route: 'user' });
  }

  @Post('workflows/async')
  @UserRoute('Launch a workflow asynchronously', 'POST /workflows/async')
  @StreamedBody('application/json', 'multipart/form-data')
  @UpstreamAnswer(202, 'Accepted.')
  launchAsync(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'same', route: 'user' });
  }

  @Get('workflows/:workflowId')
  @UserRoute('Read one workflow', 'GET /workflows/{workflowId}')
  @ApiParam({ name: 'workflowId' })
  @UpstreamAnswer(200, 'The workflow with versionNumber, lastModified and Author.')
  getWorkflow(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'same', route: 'user' });
  }

  @Patch('workflows/:workflowId/approvals')
  @UserRoute('Approve on behalf of the user (only the holder of the approval can)', 'PATCH /workflows/{id}/approvals')
  @ApiParam({ name: 'workflowId' })
  @StreamedBody('application/json')
  @UpstreamAnswer(200, 'The workflow after the approval.')
  approve(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'same', route: 'user' });
  }

  @Post('workflows/:workflowId/upload-signed')
  @UserRoute('Upload a signed document (the workflow must be in the Sign step)', 'POST /workflows/{id}/upload-signed')
  @ApiParam({ name: 'workflowId' })
  @StreamedBody('multipart/form-data')
  @UpstreamAnswer(200, 'The workflow with the signed document.')
  uploadSigned(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'same', route: 'user' });
  }

  @Get('me')
  @UserRoute("The acting user's upstream profile", '/userinfo (method: CWS_<ENV>_USERINFO_METHOD)')
  @UpstreamAnswer(200, "The token's user: id, e-mail, username, granted scopes.")
  me(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'userinfo' });
  }

  @All('proxy/*path')
  @UserRoute('Any upstream endpoint, as is', '{ANY} /{path…}')
  @AdminRoute('Any upstream endpoint, as is', '{ANY} /webhooks… (admin token)')
  @ApiParam({ name: 'path', description: 'The upstream path. Paths under /webhooks use the admin token (X-User-Id ignored); all others the user\'s.' })
  @StreamedBody('application/json', 'multipart/form-data', 'application/octet-stream')
  proxy(@Param('tenantId') tenantId: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    return this.facade.forward(req, res, tenantId, { kind: 'proxy' });
  }
}
