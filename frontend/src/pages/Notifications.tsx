import { useState, type FormEvent } from "react";
import { useParams } from "react-router";
import { useAction, useApiQuery, useMutate } from "../api/hooks";
import { Card, Empty, ErrorBox, Loading, TimeAgo, useOrgPageTitle } from "../components/ui";
import { isRoleRefusal, RoleNotice } from "../components/RoleNotice";
import { ConfirmDelete, Saved } from "../components/Confirm";
import {
  CreateNotificationDocument,
  DeleteNotificationDocument,
  NotificationsDocument,
  TestNotificationDocument,
  UpdateNotificationDocument,
  type NotificationsQuery,
} from "../graphql/generated";

type Destination = NonNullable<NotificationsQuery["organization"]>["notifications"][number];
type Delivery = Destination["deliveries"][number];

/** The events a destination is sent, as checkboxes: the add form's and the edit form's. */
function EventChoices({ events, onChange }: { events: string[]; onChange: (events: string[]) => void }) {
  return (
    <fieldset className="event-choices">
      <legend>Events</legend>
      {EVENTS.map((name) => (
        <label key={name} className="check">
          <input
            type="checkbox"
            checked={events.includes(name)}
            onChange={() => onChange(events.includes(name) ? events.filter((e) => e !== name) : [...events, name])}
          />{" "}
          <span className="mono small">{name}</span>
        </label>
      ))}
    </fieldset>
  );
}

const EVENTS = ["run.awaiting_approval", "run.applied", "run.failed", "run.drifted", "run.discarded", "run.canceled", "run.no_changes", "run.planned"];
const DELIVERY_TONE: Record<Delivery["status"], string> = { DELIVERED: "success", FAILED: "danger", PENDING: "waiting", RETRYING: "warning" };

/** Notification destinations of the organization, a test button, and each one's delivery history. */
export function NotificationsPage() {
  const { org = "" } = useParams();
  const { data, error, loading, refetch } = useApiQuery(NotificationsDocument, { org });
  useOrgPageTitle("Notifications");
  if (!data && loading) return <Loading what="the notifications" />;
  if (error && !data && !isRoleRefusal(error)) return <ErrorBox error={error} />;
  const destinations = data?.organization?.notifications ?? [];
  return (
    <div className="page notifications-page">
      <div className="page-head">
        <div>
          <h1>Notifications</h1>
          <p className="muted">Run events posted to a webhook (JSON signed with HMAC-SHA256, or Slack), retried for up to 24 hours.</p>
        </div>
      </div>
      {isRoleRefusal(error) ? (
        <RoleNotice error={error}>Notification destinations are shown to admins only (their URLs may be secrets).</RoleNotice>
      ) : (
        <>
          <ErrorBox error={error} />
          <NewDestination org={org} onCreated={refetch} />
        </>
      )}
      {isRoleRefusal(error) ? null : destinations.length === 0 ? (
        <Card>
          <Empty title="No destinations yet." />
        </Card>
      ) : (
        destinations.map((d) => <DestinationCard key={d.id} org={org} destination={d} onChanged={refetch} />)
      )}
    </div>
  );
}

function NewDestination({ org, onCreated }: { org: string; onCreated: () => Promise<void> }) {
  const mutate = useMutate();
  const action = useAction();
  const empty = { name: "", url: "", format: "json", scope: "", secret: "", events: ["run.awaiting_approval", "run.failed"] };
  const [form, setForm] = useState(empty);

  async function save(event: FormEvent) {
    event.preventDefault();
    await action.run(async () => {
      const [kind, value] = form.scope.includes(":") ? form.scope.split(/:(.*)/s) : ["", ""];
      const input = {
        name: form.name,
        url: form.url,
        events: form.events,
        format: form.format,
        secret: form.secret || null,
        folder: kind === "folder" ? value : null,
        stack: kind === "stack" ? value : null,
      };
      const { createNotification } = await mutate(CreateNotificationDocument, { org, input });
      if (createNotification.__typename !== "NotificationDestination") return createNotification.message;
      setForm(empty);
      await onCreated();
    });
  }

  return (
    <Card title="Add a destination">
      <form className="notification-form" onSubmit={save}>
        <label>
          Name
          <input value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required />
        </label>
        <label>
          URL
          <input type="url" placeholder="https://hooks.example.com/firstlume" value={form.url} onChange={(e) => setForm({ ...form, url: e.target.value })} required />
        </label>
        <label>
          Format
          <select value={form.format} onChange={(e) => setForm({ ...form, format: e.target.value })}>
            <option value="json">JSON (signed)</option>
            <option value="slack">Slack incoming webhook</option>
          </select>
        </label>
        <label>
          Scope
          <input placeholder="empty: the organization; folder:prod or stack:network" value={form.scope} onChange={(e) => setForm({ ...form, scope: e.target.value })} />
        </label>
        <label>
          Signing secret
          <input type="password" autoComplete="off" placeholder="optional, write-only" value={form.secret} onChange={(e) => setForm({ ...form, secret: e.target.value })} />
        </label>
        <EventChoices events={form.events} onChange={(events) => setForm({ ...form, events })} />
        <div>
          <button className="btn primary" type="submit" disabled={action.busy}>
            Add destination
          </button>
        </div>
      </form>
      <ErrorBox error={action.error} title="The destination was not added." />
    </Card>
  );
}

function DestinationCard({ org, destination, onChanged }: { org: string; destination: Destination; onChanged: () => Promise<void> }) {
  const mutate = useMutate();
  const action = useAction();
  const [tested, setTested] = useState<string | null>(null);

  async function test() {
    setTested(null);
    await action.run(async () => {
      const { testNotification } = await mutate(TestNotificationDocument, { org, id: destination.id });
      if (testNotification.__typename !== "NotificationDelivery") return testNotification.message;
      const attempt = testNotification.attempts[0];
      setTested(testNotification.status === "DELIVERED" ? `Delivered (HTTP ${attempt?.statusCode}).` : `Not delivered: ${attempt?.error ?? "no answer"}.`);
      await onChanged();
    });
  }

  const removal = useAction();
  const [editing, setEditing] = useState(false);
  async function remove() {
    await removal.run(async () => {
      const { deleteNotification } = await mutate(DeleteNotificationDocument, { org, id: destination.id });
      if (deleteNotification.__typename !== "DeletedNotification") return deleteNotification.message;
      await onChanged();
    });
  }

  const scope = destination.stack ? `stack ${destination.stack}` : destination.folder ? `folder ${destination.folder}` : "the organization";
  return (
    <Card
      title={destination.name}
      className="destination"
      actions={
        <div className="actions">
          <button className="btn small" onClick={() => void test()} disabled={action.busy}>
            Send a test
          </button>
          <button className="btn small" onClick={() => setEditing(!editing)} aria-expanded={editing}>
            Edit
          </button>
        </div>
      }
    >
      <div className="destination-body">
      <p className="small wrap">
        <span className="mono">{destination.url}</span> · {destination.format === "slack" ? "Slack" : "JSON"}
        {destination.hasSecret && " · signed"} · {scope}
      </p>
      <p className="small">
        {destination.events.map((e) => (
          <span key={e} className="pill event-pill mono">
            {e}
          </span>
        ))}
      </p>
      {tested && (
        <p className="small" role="status" data-testid="test-result">
          {tested}
        </p>
      )}
      <ErrorBox error={action.error} />
      {editing && <EditDestination org={org} destination={destination} onSaved={onChanged} />}
      <ConfirmDelete
        what="destination"
        name={destination.name}
        busy={removal.busy}
        error={removal.error}
        onDelete={() => void remove()}
        question={
          <>
            <strong>Delete destination “{destination.name}”?</strong> Its delivery history goes with it; nothing more is sent there.
          </>
        }
      />
      <h3 className="small-heading">Deliveries</h3>
      </div>
      {destination.deliveries.length === 0 ? (
        <p className="muted small">Nothing sent yet.</p>
      ) : (
        <div className="table-box">
          <table className="table responsive deliveries-table">
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Attempts</th>
              </tr>
            </thead>
            <tbody>
              {destination.deliveries.map((delivery) => (
                <tr key={delivery.id} data-delivery={delivery.id}>
                  <td data-label="Event" className="mono small">{delivery.event}</td>
                  <td data-label="Status">
                    <span className={`badge small tone-${DELIVERY_TONE[delivery.status]}`}>{delivery.status.toLowerCase()}</span>
                  </td>
                  <td data-label="Created" className="small nowrap">
                    <TimeAgo iso={delivery.createdAt} />
                  </td>
                  <td data-label="Attempts" className="small">
                    <ol className="attempts">
                      {delivery.attempts.map((a) => (
                        <li key={a.number}>
                          {a.statusCode ?? "no answer"} · {a.durationMs} ms{a.error ? ` · ${a.error}` : ""}
                        </li>
                      ))}
                    </ol>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Card>
  );
}

/** A destination's name, URL, format, events and signing secret (write-only: empty keeps it). */
function EditDestination({ org, destination, onSaved }: { org: string; destination: Destination; onSaved: () => Promise<void> }) {
  const mutate = useMutate();
  const action = useAction();
  const [form, setForm] = useState({ name: destination.name, url: destination.url, format: destination.format, events: destination.events, secret: "" });
  const change = (next: typeof form) => {
    action.reset();
    setForm(next);
  };
  async function save(event: FormEvent) {
    event.preventDefault();
    await action.run(async () => {
      const input = { name: form.name, url: form.url, format: form.format, events: form.events, ...(form.secret ? { secret: form.secret } : {}) };
      const { updateNotification } = await mutate(UpdateNotificationDocument, { org, id: destination.id, input });
      if (updateNotification.__typename !== "NotificationDestination") return updateNotification.message;
      setForm({ ...form, secret: "" });
      await onSaved();
    });
  }
  return (
    <form className="notification-form edit-destination" onSubmit={save} aria-label={`Edit ${destination.name}`}>
      <label>
        Name
        <input value={form.name} onChange={(e) => change({ ...form, name: e.target.value })} required />
      </label>
      <label>
        URL
        <input type="url" value={form.url} onChange={(e) => change({ ...form, url: e.target.value })} required />
      </label>
      <label>
        Format
        <select value={form.format} onChange={(e) => change({ ...form, format: e.target.value })}>
          <option value="json">JSON (signed)</option>
          <option value="slack">Slack incoming webhook</option>
        </select>
      </label>
      <label>
        New signing secret
        <input type="password" autoComplete="off" placeholder={destination.hasSecret ? "empty: keep the current one" : "optional, write-only"} value={form.secret} onChange={(e) => change({ ...form, secret: e.target.value })} />
      </label>
      <EventChoices events={form.events} onChange={(events) => change({ ...form, events })} />
      <div>
        <button className="btn primary" type="submit" disabled={action.busy}>
          Save destination
        </button>
        <Saved show={action.done} />
      </div>
      <ErrorBox error={action.error} title="The destination was not changed." />
    </form>
  );
}
