/*
 * cmd_train.c - `attograd train`: read and check the options, then set the
 * run up (train_setup.c) and train (train_loop.c).
 *
 * Randomness: one --seed feeds three PCG32 streams -- initialization,
 * dropout and data -- so a run is reproducible bit for bit.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "dist.h"
#include "files.h"
#include "train.h"

static const char *CMD = "train";
#define RESUME_WHY "--resume continues the saved run exactly (use --init FILE to start a new run from its weights)"

/* A flag given with --resume, or an architecture flag with --init, must
 * say what the checkpoint holds: then it changes nothing and is accepted;
 * another value is refused, with `why`.  o holds the given value; held is
 * the checkpoint's, as text the flag reads.  o is left holding it. */
static void same_as_checkpoint(opt *o, const char *held, const char *verb, const char *why)
{
    char given[64], kept[64];
    args_format(o, given, sizeof given);
    if (!held || args_set(o, held) != 0)
        return;                     /* not in the checkpoint: reading the run says so */
    args_format(o, kept, sizeof kept);
    if (strcmp(given, kept) == 0)
        return;
    if (o->kind == OPT_DOUBLE) {
        /* shown as given, not to 17 digits, but with the digits that tell
         * them apart (0.9000000000000001 and 0.9, not 0.9 and 0.9) */
        double g = strtod(given, NULL), k = strtod(kept, NULL);
        for (int digits = 6; digits <= 17; digits++) {
            snprintf(given, sizeof given, "%.*g", digits, g);
            snprintf(kept, sizeof kept, "%.*g", digits, k);
            if (strtod(given, NULL) == g && strtod(kept, NULL) == k)
                break;
        }
    }
    die(CMD, "%s %s (%s given, the checkpoint holds %s): %s", o->name, verb, given, kept, why);
}

/* The option a recorded setting (run.h's RUN_RECORDED) is read and written
 * through: the flag --KEY, '_' written '-' (--weight-decay), but for the
 * text (--text), the log (--log) and the schedule's horizon, which is a copy
 * of --steps' entry into schedule_steps (never given: --steps given again
 * does not move it).  A saved value is checked like the flag: one range, one
 * place. */
static opt *saved_option(const run_recorded *k, train_opts *o, opt *opts, int nopts, opt *horizon)
{
    static const struct { const char *key, *flag; } named[] = {
        { "text_path", "--text" }, { "log_path", "--log" }, { "schedule_steps", "--steps" },
    };
    char flag[64];
    int n = snprintf(flag, sizeof flag, "--%s", k->key);
    for (int i = 2; i < n; i++)
        flag[i] = flag[i] == '_' ? '-' : flag[i];
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcmp(k->key, named[i].key) == 0)
            snprintf(flag, sizeof flag, "%s", named[i].flag);
    opt *found = args_find(opts, nopts, flag);
    if (!found)
        die(CMD, "no option %s for the recorded setting %s", flag, k->key);     /* a table out of step */
    if (strcmp(k->key, "schedule_steps") != 0)
        return found;
    *horizon = *found;
    horizon->dst = &o->schedule_steps;
    horizon->given = 0;
    return horizon;
}

/* --resume: the saved run's options, as they were (those given again:
 * --steps, --text). */
static void restore_options(trainer *t, opt *opts, int nopts)
{
    const ckpt *ck = &t->ck;
    if (!ck->has_state)
        die(CMD, "%s holds weights only, no optimizer state to resume (use --init %s)", t->o.resume, t->o.resume);
    const char *optimizer = ck->optim_kind == AG_ADAMW ? "adamw" : "sgd";
    if (args_find(opts, nopts, "--optimizer")->given && strcmp(t->o.optimizer, optimizer) != 0)
        die(CMD, "--optimizer cannot be changed with --resume (%s given, the checkpoint holds %s): %s",
            t->o.optimizer, optimizer, RESUME_WHY);
    t->o.optimizer = optimizer;
    opt *micro = args_find(opts, nopts, "--micro-batch");
    if (micro->given && !ckpt_meta(ck, "micro_batch"))
        die(CMD, "--micro-batch cannot be changed with --resume (the checkpoint's run took whole batches): %s",
            RESUME_WHY);
    /* the saved settings as the playground's Open checkpoint reads them:
     * each in its flag's range, and together as a new run's flags must be */
    run_settings saved;
    char err[ERR_MAX];
    if (run_settings_read(&saved, ck, err, sizeof err))
        die(CMD, "%s, so the run cannot be resumed", err);
    for (int i = 0; i < RUN_N_RECORDED; i++) {
        const run_recorded *s = &RUN_RECORDED[i];
        opt horizon, *o = saved_option(s, &t->o, opts, nopts, &horizon);
        const char *v = run_recorded_text(ck, s);
        /* a flag given again must say what the run holds; --steps may
         * extend the run, --text names the same file from elsewhere
         * (its identity is checked when it is read), and --log only
         * moves where the rest of the log goes */
        if (o->given && strcmp(o->name, "--steps") != 0 && strcmp(o->name, "--text") != 0 &&
            strcmp(o->name, "--log") != 0)
            same_as_checkpoint(o, v, "cannot be changed with --resume", RESUME_WHY);
        /* run_settings_read has refused a required setting that is absent
         * and every value out of its range (the flag's range, read the way
         * the flag reads it): what is absent here is unset, and a value
         * the flag refuses is a table out of step, never a file's fault */
        if (o->given || !v)
            continue;
        if (args_set(o, v))
            die(CMD, "%s: metadata %s = '%.40s' passes run_settings_read but not %s (a table out of step)", ck->path,
                s->key, v, o->name);
    }
    /* the text by the path it was saved with, moved since (its directory perhaps) */
    if (t->o.text && !args_find(opts, nopts, "--text")->given && access(t->o.text, F_OK) != 0)
        die(CMD, "cannot open %s, the text the checkpoint was trained on: %s; give it with --text FILE", t->o.text,
            strerror(errno));
}

/* The learning-rate schedule is fixed by the --steps of the run that set
 * it: a resumed run asked for more steps does not stretch it (that would
 * raise the learning rate again); past its end a cosine schedule stays at
 * --min-lr.  The horizon is saved as schedule_steps (a checkpoint without
 * it: its steps) and read back like --steps.  Schedules that make no sense
 * are refused (a resumed run's were checked when it started). */
static void check_schedule(trainer *t, opt *opts, int nopts)
{
    train_opts *o = &t->o;
    if (o->resume) {
        if (o->steps < t->ck.step)
            die(CMD, "--steps %ld is less than the %ld step%s the checkpoint has already taken", o->steps,
                t->ck.step, t->ck.step == 1 ? "" : "s");
    } else {
        const char *only_cosine[] = { "--warmup", "--min-lr" };
        for (int i = 0; i < 2 && !t->cosine; i++)
            if (args_find(opts, nopts, only_cosine[i])->given)
                die(CMD, "%s applies only to --schedule cosine (the schedule is constant)", only_cosine[i]);
        if (t->cosine && o->min_lr > o->lr)
            die(CMD, "--min-lr %g is above --lr %g: the cosine schedule would raise the learning rate; give "
                     "--min-lr <= --lr", o->min_lr, o->lr);
        if (t->cosine && o->warmup > o->steps)
            die(CMD, "--warmup %ld is longer than --steps %ld: the learning rate would never reach --lr",
                o->warmup, o->steps);
    }
    if (!o->resume || !t->cosine)
        o->schedule_steps = o->steps;       /* a constant schedule has no end to keep */
}

/* A new run's flags that its optimizer or data would ignore are refused,
 * as --warmup is without the cosine schedule: a run given --momentum with
 * AdamW would not be the run asked for. */
static void check_applies(const trainer *t, opt *opts, int nopts)
{
#ifndef AG_MPI
    /* the MPI build's: one process here, with no other rank to wait for */
    if (args_find(opts, nopts, "--mpi-timeout")->given)
        die(CMD, "--mpi-timeout applies only to the MPI build (make MPI=1); this attograd trains in one process");
#endif
    if (t->o.resume)
        return;                 /* the saved run's, checked when it started */
    const char *sgd_only[] = { "--momentum" }, *adamw_only[] = { "--beta1", "--beta2", "--eps" };
    for (size_t i = 0; i < sizeof sgd_only / sizeof *sgd_only && t->adamw; i++)
        if (args_find(opts, nopts, sgd_only[i])->given)
            die(CMD, "%s applies only to --optimizer sgd (the optimizer is adamw)", sgd_only[i]);
    for (size_t i = 0; i < sizeof adamw_only / sizeof *adamw_only && !t->adamw; i++)
        if (args_find(opts, nopts, adamw_only[i])->given)
            die(CMD, "%s applies only to --optimizer adamw (the optimizer is sgd)", adamw_only[i]);
    if (t->o.task && args_find(opts, nopts, "--order")->given)
        die(CMD, "--order applies only to --text (task %s draws random problems)", t->o.task);
}

/* What a later --resume needs: the recorded settings (run.h), read from
 * their options; the text and the log by their absolute paths (eval and
 * --resume find them from any directory), the text with its identity (a
 * changed file is not resumed on silently). */
static void save_options(trainer *t, opt *opts, int nopts)
{
    run_settings s = RUN_DEFAULTS;
    for (int i = 0; i < RUN_N_RECORDED; i++) {
        const run_recorded *k = &RUN_RECORDED[i];
        opt horizon, *o = saved_option(k, &t->o, opts, nopts, &horizon);
        char text[64];
        if (o->kind != OPT_STRING)
            args_format(o, text, sizeof text);
        const char *v = o->kind == OPT_STRING ? *(const char **)o->dst : text;
        if (o->kind != OPT_STRING && k->missing && !*k->missing && strcmp(v, "0") == 0)
            continue;           /* unset (--micro-batch not given): left out, as run_record_write leaves it */
        if (v && run_setting_set(&s, k, v))
            die(CMD, "%s %s cannot be recorded in the checkpoint", o->name, v);    /* checked before: never */
    }
    if (s.text_path && realpath(s.text_path, t->text_path))
        s.text_path = t->text_path;
    s.log_path = t->log_abs[0] ? t->log_abs : NULL;     /* every rank's, though rank 0 alone writes it */
    run_record_write(&t->record, &s, s.text_path ? &t->data.text : NULL);
}

/* path from the root, for a file that may not exist yet: its directory's
 * real path and its name (as given, if even that cannot be resolved) */
static void absolute_path(const char *path, char out[PATH_MAX])
{
    if (realpath(path, out))
        return;
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    const char *name = slash ? slash + 1 : path;
    size_t n;
    if (!realpath(dir, out) || (n = strlen(out)) + 1 + strlen(name) >= PATH_MAX)
        snprintf(out, PATH_MAX, "%s", path);
    else
        snprintf(out + n, PATH_MAX - n, "%s%s", n > 1 ? "/" : "", name);     /* "/" ends in its slash */
}

/* Flags that contradict each other or the checkpoint, before anything is read. */
static void check_combinations(const train_opts *o)
{
    if (o->task && o->text)
        die(CMD, "--task and --text both given: choose one data source");
    if (o->init && o->resume)
        die(CMD, "--init and --resume both given: --init starts a new run from weights, --resume continues one");
    if (o->save_every > 0 && !o->save)
        die(CMD, "--save-every needs --save FILE");
    if (o->accept_changed_data && !o->resume)
        die(CMD, "--accept-changed-data applies to --resume FILE");
    if (o->truncate_log && !o->resume)
        die(CMD, "--truncate-log applies to --resume FILE");
}

/* The model flags given beside --init or --resume (--init takes dropout and
 * a context up to the saved one from the flags), against the checkpoint's
 * config: equal values are accepted, others refused. */
static void model_flags_as_saved(trainer *t, opt *opts, int nopts)
{
    const model_config *c = &t->ck.cfg;
    char v[5][32];
    snprintf(v[0], sizeof v[0], "%d", c->n_layer);
    snprintf(v[1], sizeof v[1], "%d", c->n_head);
    snprintf(v[2], sizeof v[2], "%d", c->d_model);
    snprintf(v[3], sizeof v[3], "%d", c->context);
    snprintf(v[4], sizeof v[4], "%.17g", c->dropout);
    const struct { const char *flag, *held; } held[] = {
        { "--arch", model_arch_name(c->arch) }, { "--layers", v[0] }, { "--heads", v[1] }, { "--d-model", v[2] },
        { "--context", v[3] }, { "--dropout", v[4] },
    };
    const char *verb = t->o.resume ? "cannot be used with --resume" : "cannot be used with --init";
    const char *why = t->o.resume ? "the model's config comes from the checkpoint"
                                  : "the model's architecture comes from the checkpoint";
    size_t n = sizeof held / sizeof held[0] - (t->o.init ? 2 : 0);
    for (size_t i = 0; i < n; i++) {
        opt *o = args_find(opts, nopts, held[i].flag);
        if (o->given)
            same_as_checkpoint(o, held[i].held, verb, why);
    }
    if (args_find(opts, nopts, "--qkv-bias")->given && !c->qkv_bias)
        die(CMD, "--qkv-bias %s (the checkpoint's model has no query/key/value biases): %s", verb, why);
}

/* The task or text: with a checkpoint, the one it was trained on. */
static void data_source(trainer *t)
{
    train_opts *o = &t->o;
    const ckpt *ck = &t->ck;
    if (t->from) {
        int is_text = strcmp(ck->data, "text") == 0;
        check_data_flags(CMD, ck, o->task, o->text);
        if (is_text && !o->text && (!(o->text = ckpt_meta(ck, "text_path")) || !*o->text))     /* absent, or "" */
            die(CMD, "%s was trained on a text file it does not name: give it with --text FILE", ck->path);
        if (!is_text)
            o->task = ck->data;
    }
    if (!o->task && !o->text)
        o->task = "copy";
}

/* No output may destroy an input or another output (a resumed run saves
 * back to its checkpoint: --save may be the --resume file).  And find out
 * now, not after training, that the checkpoint cannot be written: create
 * and remove the very temporary file a save creates. */
static void check_files(const train_opts *o)
{
    file_arg in[] = { { "--text", o->text }, { "--init", o->init }, { "--resume", o->resume } };
    file_arg log[] = { { "--log", o->log_path } };
    file_arg out[] = { { "--save", o->save }, { "--log", o->log_path } };
    check_distinct(CMD, in, 3, log, 1);
    check_distinct(CMD, in, 2, out, 2);
    check_stdout_apart(CMD, in, 3);     /* the report would go into an input */
    char err[ERR_MAX];
    if (o->log_path && file_name_too_long(o->log_path, err, sizeof err))
        die(CMD, "cannot write log: %s", err);
    if (o->save && output_check(o->save, err, sizeof err))
        die(CMD, "%s%s", o->save == o->resume ? "cannot save back to the --resume file: " : "", err);
    if (o->save && o->save_every > 0 && output_through(o->save))
        die(CMD, "--save-every %ld: --save %s is written through (a stream, a pipe or a device), where each save "
                 "would follow the last; save to a file", o->save_every, o->save);
}

/* A checkpoint records the text and the log by their absolute paths, in
 * metadata that is JSON, so UTF-8: a path of other bytes (a Linux name may
 * hold any) would make every save fail, after the run.  Refused now, before
 * anything is trained or written; a run that saves nothing records nothing. */
static void check_recordable(const trainer *t)
{
    const train_opts *o = &t->o;
    char text_abs[PATH_MAX], err[ERR_MAX];
    const char *text = o->text && realpath(o->text, text_abs) ? text_abs : o->text;
    const struct { const char *flag, *given, *path; } rec[] = {
        { "--text", o->text, text }, { "--log", o->log_path, t->log_abs[0] ? t->log_abs : NULL },
    };
    for (size_t i = 0; o->save && i < sizeof rec / sizeof rec[0]; i++) {
        const char *meta[2] = { "path", rec[i].path };
        if (rec[i].path && ag_st_check(o->save, NULL, 0, meta, 1, err, sizeof err))
            die(CMD, "%s %s: its path %s is not valid UTF-8, and a checkpoint's metadata (JSON) must be: no save "
                     "could record it; give the file a name in UTF-8", rec[i].flag, rec[i].given, rec[i].path);
    }
}

/* Names that must be one of a few words, what depends on them, and the
 * model's sizes. */
static void check_values(trainer *t)
{
    train_opts *o = &t->o;
    if (!t->from && model_arch_parse(o->arch) < 0)
        die(CMD, "--arch '%s' is not an architecture (use gpt or attn-only)", o->arch);
    t->adamw = strcmp(o->optimizer, "adamw") == 0;
    if (!t->adamw && strcmp(o->optimizer, "sgd") != 0)
        die(CMD, "--optimizer '%s' is not an optimizer (use sgd or adamw)", o->optimizer);
    t->cosine = strcmp(o->schedule, "cosine") == 0;
    if (!t->cosine && strcmp(o->schedule, "constant") != 0)
        die(CMD, "--schedule '%s' is not a schedule (use constant or cosine)", o->schedule);
    t->random_order = strcmp(o->order, "random") == 0;
    if (!t->random_order && strcmp(o->order, "sequential") != 0)
        die(CMD, "--order '%s' is not an order (use random or sequential)", o->order);
    if (!t->from && o->d_model % o->heads != 0)
        die(CMD, "--heads %d does not divide --d-model %d (each head gets d_model/heads dims)", o->heads,
            o->d_model);
    if (o->init && o->context > t->ck.cfg.context)
        die(CMD, "--context %d is longer than the checkpoint's %d: it has no position embeddings beyond that",
            o->context, t->ck.cfg.context);
    if (o->lr < 0)
        o->lr = run_default_lr(t->adamw);
    t->precision = precision_parse(CMD, o->precision);
}

/* The row of a recorded setting, by key (a table out of step: said). */
static const run_recorded *recorded(const char *key)
{
    const run_recorded *k = run_recorded_find(key);
    if (!k)
        die(CMD, "no recorded setting %s", key);
    return k;
}

/* The defaults, and the option table over them (N_OPTS rows). */
enum { N_OPTS = 38 };
static void train_options(train_opts *o, opt opts[N_OPTS])
{
    const run_settings *r = &RUN_DEFAULTS;     /* the playground's too */
    *o = (train_opts){
        .arch = "gpt", .optimizer = "sgd", .schedule = r->schedule, .order = r->order,
        .layers = 2, .heads = 4, .d_model = 64, .context = 0, .batch = r->batch, .threads = 0,
        .dropout = 0, .lr = -1, .momentum = r->momentum, .weight_decay = r->weight_decay, .beta1 = r->beta1,
        .beta2 = r->beta2, .eps = r->eps, .clip = r->clip, .min_lr = r->min_lr, .steps = r->steps, .seed = r->seed,
        .eval_every = 100, .log_every = 50, .warmup = r->warmup, .save_every = 0, .precision = r->precision,
        .micro_batch = r->micro_batch, .mpi_timeout = 600,
    };
    /* a recorded setting's flag takes its range from run.h's RUN_RECORDED:
     * the range a checkpoint's value is checked against, here and in the
     * playground: one range, one place */
#define RANGE(key) recorded(key)->min, recorded(key)->max, recorded(key)->min_open
    const opt table[] = {
        { "--task", OPT_STRING, &o->task, "NAME", "toy task: copy (default), reverse, sort, add", 0, 0, 0, 0, 0 },
        { "--text", OPT_STRING, &o->text, "FILE", "character-level language modeling on a file", 0, 0, 0, 0, 0 },
        { "--arch", OPT_STRING, &o->arch, "A", "gpt (default) or attn-only", 0, 0, 0, 0, 0 },
        { "--layers", OPT_INT, &o->layers, "N", "transformer blocks (default 2)", 1, MODEL_MAX_LAYERS, 0, 0, 0 },
        { "--heads", OPT_INT, &o->heads, "N", "attention heads; must divide d-model (default 4)", 1, MODEL_MAX_HEADS, 0, 0, 0 },
        { "--d-model", OPT_INT, &o->d_model, "N", "embedding width (default 64)", 1, MODEL_MAX_D_MODEL, 0, 0, 0 },
        { "--context", OPT_INT, &o->context, "T", "context length (default: task length, 64 for text, --init's)", 1, MODEL_MAX_CONTEXT, 0, 0, 0 },
        { "--dropout", OPT_DOUBLE, &o->dropout, "P", "dropout probability, 0 to 0.999999 (default 0)", RUN_DROPOUT.min, RUN_DROPOUT.max, RUN_DROPOUT.min_open, 0, 0 },
        { "--qkv-bias", OPT_FLAG, &o->qkv_bias, NULL, "biases on the query/key/value projections", 0, 0, 0, 0, 0 },
        { "--optimizer", OPT_STRING, &o->optimizer, "O", "sgd (default) or adamw", 0, 0, 0, 0, 0 },
        { "--lr", OPT_DOUBLE, &o->lr, "X", "learning rate > 0 (default 0.1 sgd, 3e-3 adamw)", RANGE("lr"), 0, 0 },
        { "--momentum", OPT_DOUBLE, &o->momentum, "X", "SGD momentum, 0 to 0.999999 (default 0.9)", RANGE("momentum"), 0, 0 },
        { "--weight-decay", OPT_DOUBLE, &o->weight_decay, "X", "weight decay >= 0 (default 0)", RANGE("weight_decay"), 0, 0 },
        { "--beta1", OPT_DOUBLE, &o->beta1, "X", "AdamW beta1, 0 to 0.999999 (default 0.9)", RANGE("beta1"), 0, 0 },
        { "--beta2", OPT_DOUBLE, &o->beta2, "X", "AdamW beta2, 0 to 0.999999999 (default 0.999)", RANGE("beta2"), 0, 0 },
        { "--eps", OPT_DOUBLE, &o->eps, "X", "AdamW epsilon > 0 (default 1e-8)", RANGE("eps"), 0, 0 },
        { "--clip", OPT_DOUBLE, &o->clip, "X", "clip the global gradient norm to X; 0 = off (default 1)", RANGE("clip"), 0, 0 },
        { "--schedule", OPT_STRING, &o->schedule, "S", "constant (default) or cosine", 0, 0, 0, 0, 0 },
        { "--warmup", OPT_LONG, &o->warmup, "N", "cosine: linear warmup steps (default 0)", RANGE("warmup"), 0, 0 },
        { "--min-lr", OPT_DOUBLE, &o->min_lr, "X", "cosine: final learning rate (default 0)", RANGE("min_lr"), 0, 0 },
        { "--batch", OPT_INT, &o->batch, "B", "sequences per step (default 32)", RANGE("batch"), 0, 0 },
        { "--steps", OPT_LONG, &o->steps, "N", "optimizer steps in all (--resume: counting those taken; default 400, --resume: the run's)", RANGE("steps"), 0, 0 },
        { "--seed", OPT_INT64, &o->seed, "S", "seed of every random choice (default 1)", RANGE("seed"), 0, 0 },
        { "--eval-every", OPT_LONG, &o->eval_every, "N", "evaluate every N steps; 0 = only at the end (default 100)", 0, 1e15, 0, 0, 0 },
        { "--log-every", OPT_LONG, &o->log_every, "N", "print a progress line every N steps (default 50)", 1, 1e15, 0, 0, 0 },
        { "--threads", OPT_INT, &o->threads, "N", "threads; 0 = all cores (default); 1 is safest on a busy machine", 0, 1024, 0, 0, 0 },
        PRECISION_OPT(o->precision),
        { "--log", OPT_STRING, &o->log_path, "FILE", "write step, losses, lr and speed as CSV", 0, 0, 0, 0, 0 },
        { "--order", OPT_STRING, &o->order, "O", "text windows: random (default) or sequential", 0, 0, 0, 0, 0 },
        { "--save", OPT_STRING, &o->save, "FILE", "save the model (safetensors) at the end (--resume: default its file)", 0, 0, 0, 0, 0 },
        { "--save-every", OPT_LONG, &o->save_every, "N", "also save every N steps (needs --save); 0 = off (default); SIGUSR1 saves after the current step", 0, 1e15, 0, 0, 0 },
        { "--init", OPT_STRING, &o->init, "FILE", "start from a checkpoint's weights and architecture", 0, 0, 0, 0, 0 },
        { "--resume", OPT_STRING, &o->resume, "FILE", "continue a saved run exactly", 0, 0, 0, 0, 0 },
        { "--quiet", OPT_FLAG, &o->quiet, NULL, "only the summary", 0, 0, 0, 0, 0 },
        { "--accept-changed-data", OPT_FLAG, &o->accept_changed_data, NULL, "--resume on a text file that changed since the checkpoint was saved", 0, 0, 0, 0, 0 },
        { "--truncate-log", OPT_FLAG, &o->truncate_log, NULL, "--resume: drop the log's rows past the checkpoint's step (a run killed after a save logged them; refused otherwise)", 0, 0, 0, 0, 0 },
        { "--micro-batch", OPT_INT, &o->micro_batch, "M", "sum gradients of M-row parts in a fixed tree: the same bits on any number of ranks (default: whole batches; MPI build: see README)", RANGE("micro_batch"), 0, 0 },
        { "--mpi-timeout", OPT_LONG, &o->mpi_timeout, "S", "MPI build: a rank waits at most S s for the others; 0 = forever (default 600)", 0, 1e7, 0, 0, 0 },
    };
#undef RANGE
    _Static_assert(sizeof table / sizeof table[0] == N_OPTS, "N_OPTS counts the rows");
    memcpy(opts, table, sizeof table);
}

int cmd_train(int argc, char **argv)
{
    trainer t;
    memset(&t, 0, sizeof t);
    train_opts *o = &t.o;
    opt opts[N_OPTS];
    train_options(o, opts);
    int nopts = N_OPTS;
    dist_start(CMD);
    args_exit_hook = dist_exit;     /* a verdict every rank reaches: they leave together */
    args_parse(CMD, "Train a multi-head causal attention model on a toy next-token task or a text file.\n"
                    "SIGINT, SIGTERM, SIGHUP, SIGUSR2 and SIGALRM (a scheduler's warning before a kill)\n"
                    "finish the current step, save (--save, or the --resume file) and exit 128 + the\n"
                    "signal (one ignored when the run started stays ignored: SIGHUP under nohup, SIGINT\n"
                    "in a job started with & by a script); SIGUSR1 saves after the current step and\n"
                    "trains on.",
               argc, argv, opts, nopts);
    /* progress written to a closed pipe must not end the run (train_loop.c
     * stops printing instead) */
    signal(SIGPIPE, SIG_IGN);
    /* SIGUSR1 asks for a checkpoint; one that comes while the run is set
     * up is served after its first step */
    train_watch_save_signal();

    if (o->resume && !o->save)
        o->save = o->resume;        /* a resumed run saves back where it came from */
    check_combinations(o);
    t.from = o->resume ? o->resume : o->init;
    if (t.from) {
        /* --init may start from a PyTorch state_dict, which need not say
         * its heads or data: the flags say them (a --heads the file
         * contradicts is refused) */
        ckpt_hints hints = { args_find(opts, nopts, "--heads")->given ? o->heads : 0, o->task, o->text, 0, 0 };
        open_model(CMD, t.from, o->init ? &hints : NULL, &t.ck, &t.m);
        /* its dropout in --dropout's range, read as the flag reads it (the
         * reader takes any number in [0, 1)) */
        double dropout;
        char err[ERR_MAX];
        if (run_dropout_read(&t.ck, &dropout, err, sizeof err))
            die(CMD, "%s, so %s", err, o->resume ? "the run cannot be resumed" : "a run cannot start from it");
        model_flags_as_saved(&t, opts, nopts);
    }
    if (o->resume)
        restore_options(&t, opts, nopts);
    data_source(&t);
    check_values(&t);
    check_schedule(&t, opts, nopts);
    check_applies(&t, opts, nopts);
    /* a resumed run already at its last step trains nothing: its file, where
     * it saves back, is left as it was (writing the same bytes again would
     * only replace it, and fail in a read-only directory); a --save
     * elsewhere is a copy asked for, and is written */
    if (o->resume && t.ck.step == o->steps && !output_through(o->save) && files_same(o->save, o->resume)) {
        t.kept = o->save;
        o->save = NULL;
    }
    /* from the outputs' locks until training starts (train_loop.c installs
     * its own handler), a signal removes what the run has made: the lock
     * files, and a log being rewritten by log_drop_after */
    outputs_discard_on_signals();
    check_files(o);
    if (o->log_path && ag_stream_fd(o->log_path) < 0)    /* a stream (/dev/stdout) is no file to continue */
        absolute_path(o->log_path, t.log_abs);
    check_recordable(&t);
    train_dist_configure(&t, args_find(opts, nopts, "--micro-batch"));

    train_setup(&t);
    save_options(&t, opts, nopts);
    train_dist_setup(&t);
    int status = train_loop(&t);
    status = train_dist_end(&t, status);
    train_free(&t);
    return status;
}
