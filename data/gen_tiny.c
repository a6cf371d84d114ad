/*
 * gen_tiny.c - writes data/tiny.txt, the default corpus for `attograd train
 * --text`: short stories from a small template grammar (one sentence per
 * line, a blank line between stories), deterministic from a fixed seed.
 *
 *   gcc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Iinclude data/gen_tiny.c src/pcg32.c src/mathfn.c -lm -o gen_tiny
 *   ./gen_tiny > data/tiny.txt          (optional argument: bytes, default 45000)
 *
 * A few hundred words in a few dozen sentence shapes: varied enough that
 * the next character is not given away, regular enough that a tiny model's
 * validation loss falls well below the unigram entropy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct person { const char *name, *he, *his, *him; } person;

static const person people[] = {
    {"Mia", "she", "her", "her"},   {"Tom", "he", "his", "him"},   {"Ada", "she", "her", "her"},
    {"Ben", "he", "his", "him"},    {"Lily", "she", "her", "her"}, {"Sam", "he", "his", "him"},
    {"Nora", "she", "her", "her"},  {"Max", "he", "his", "him"},   {"Ruth", "she", "her", "her"},
    {"Leo", "he", "his", "him"},
};
/* Each animal with the sound it makes, so the pair is learnable. */
static const char *animals[][2] = {
    {"fox", "yipped"},   {"owl", "hooted"},     {"cat", "purred"},     {"dog", "barked"},
    {"duck", "quacked"}, {"hen", "clucked"},    {"goat", "bleated"},   {"mouse", "squeaked"},
    {"frog", "croaked"}, {"pony", "neighed"},
};
static const char *places[] = {"the river", "the hill", "the old mill", "the garden", "the market",
                               "the forest", "the bridge", "the barn", "the lake", "the village"};
static const char *things[] = {"a red ball", "a blue kite", "a small key", "a green hat",
                               "a paper boat", "a shiny stone", "a wooden spoon", "an old map",
                               "a yellow cup", "a tiny bell"};
static const char *foods[] = {"a warm loaf of bread", "two sweet apples", "a bowl of soup",
                              "some cheese", "a jar of honey", "three plums"};
static const char *weathers[] = {"sunny", "windy", "rainy", "cold", "quiet", "bright", "grey"};
static const char *times[] = {"morning", "afternoon", "evening"};
static const char *feelings[] = {"happy", "sleepy", "proud", "hungry", "glad", "calm", "tired"};
static const char *numbers[] = {"two", "three", "four", "five", "six", "seven"};

typedef struct story {
    ag_pcg32 *rng;
    const person *hero, *friend;
    const char *animal, *place, *thing, *food, *weather, *time, *feeling, *sound, *number;
} story;

static const char *pick(ag_pcg32 *rng, const char **list, int n)
{
    return list[ag_pcg32_below(rng, (uint32_t)n)];
}

#define PICK(s, list) pick((s)->rng, list, COUNT(list))

/* Capitalized copy of a phrase for the start of a sentence ("the hill" -> "The hill"). */
static const char *cap(const char *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s);
    if (buf[0] >= 'a' && buf[0] <= 'z')
        buf[0] = (char)(buf[0] - 'a' + 'A');
    return buf;
}

static void opening(const story *s, FILE *f)
{
    const person *h = s->hero;
    switch (ag_pcg32_below(s->rng, 4)) {
    case 0:
        fprintf(f, "One %s %s, %s walked to %s with %s %s.\n", s->weather, s->time, h->name,
                s->place, h->his, s->animal);
        break;
    case 1:
        fprintf(f, "It was a %s %s, and %s wanted to visit %s.\n", s->weather, s->time, h->name,
                s->place);
        fprintf(f, "%s %s came too.\n", cap(h->his, (char[16]){0}, 16), s->animal);
        break;
    case 2:
        fprintf(f, "%s lived near %s with a little %s.\n", h->name, s->place, s->animal);
        fprintf(f, "The %s was %s, so they went out to play.\n", s->time, s->weather);
        break;
    default:
        fprintf(f, "Once there was a %s who lived by %s.\n", s->animal, s->place);
        fprintf(f, "Every %s, %s came to see it.\n", s->time, h->name);
        break;
    }
}

#define N_MIDDLE 9

static void middle(const story *s, int which, FILE *f)
{
    const person *h = s->hero, *o = s->friend;
    char b[32];
    switch (which) {
    case 0:
        fprintf(f, "On the way, %s met %s, who was carrying %s.\n", h->he, o->name, s->thing);
        break;
    case 1:
        fprintf(f, "At %s, the %s found %s under a bush.\n", s->place, s->animal, s->thing);
        fprintf(f, "\"Look at this!\" said %s. \"It is %s!\"\n", h->name, s->thing);
        break;
    case 2:
        fprintf(f, "%s asked, \"May I come with you?\" and %s said yes.\n", o->name, h->name);
        break;
    case 3:
        fprintf(f, "The %s ran ahead, and %s had to run after it.\n", s->animal, h->name);
        break;
    case 4:
        fprintf(f, "They sat down by %s and shared %s.\n", s->place, s->food);
        break;
    case 5:
        fprintf(f, "%s counted %s birds in the sky.\n", h->name, s->number);
        break;
    case 6:
        fprintf(f, "The %s %s, and %s laughed at it.\n", s->animal, s->sound, h->name);
        break;
    case 7:
        fprintf(f, "%s gave %s %s, and %s said thank you.\n", h->name, o->name, s->thing, o->he);
        break;
    default:
        fprintf(f, "%s looked for %s, but %s could not find it.\n", cap(h->he, b, sizeof b),
                s->thing, h->he);
        fprintf(f, "Then the %s found it, and %s was %s again.\n", s->animal, h->he, s->feeling);
        break;
    }
}

static void closing(const story *s, FILE *f)
{
    const person *h = s->hero;
    switch (ag_pcg32_below(s->rng, 4)) {
    case 0:
        fprintf(f, "When the sun went down, they walked home, %s and ready for supper.\n", s->feeling);
        break;
    case 1:
        fprintf(f, "That night, %s dreamed about %s.\n", h->name, s->thing);
        break;
    case 2:
        fprintf(f, "And so %s and the %s were %s all day.\n", h->name, s->animal, s->feeling);
        break;
    default:
        fprintf(f, "At home, %s told %s mother about %s, and she smiled.\n", h->name, h->his,
                s->place);
        break;
    }
}

/* One story: an opening, two to four middle sentences, a closing. */
static void tell(ag_pcg32 *rng, FILE *f)
{
    story s = {.rng = rng};
    s.hero = &people[ag_pcg32_below(rng, COUNT(people))];
    do
        s.friend = &people[ag_pcg32_below(rng, COUNT(people))];
    while (s.friend == s.hero);
    int a = (int)ag_pcg32_below(rng, COUNT(animals));
    s.animal = animals[a][0], s.sound = animals[a][1], s.place = PICK(&s, places), s.thing = PICK(&s, things);
    s.food = PICK(&s, foods), s.weather = PICK(&s, weathers), s.time = PICK(&s, times);
    s.feeling = PICK(&s, feelings), s.number = PICK(&s, numbers);
    opening(&s, f);
    /* Distinct middle sentences: the first n of a shuffled list (Fisher-Yates). */
    int order[N_MIDDLE];
    for (int i = 0; i < N_MIDDLE; i++)
        order[i] = i;
    int n = 2 + (int)ag_pcg32_below(rng, 3);
    for (int i = 0; i < n; i++) {
        int j = i + (int)ag_pcg32_below(rng, (uint32_t)(N_MIDDLE - i));
        int tmp = order[i];
        order[i] = order[j], order[j] = tmp;
        middle(&s, order[i], f);
    }
    closing(&s, f);
}

int main(int argc, char **argv)
{
    long target = argc > 1 ? strtol(argv[1], NULL, 10) : 45000;
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 20240601, 7);
    long written = 0;
    char buf[2048];
    while (written < target) {
        /* Write each story through a memory stream so the total is exact. */
        FILE *mem = fmemopen(buf, sizeof buf, "w");
        if (!mem)
            return 1;
        if (written > 0)
            fputc('\n', mem);
        tell(&rng, mem);
        long len = ftell(mem);
        fclose(mem);
        fwrite(buf, 1, (size_t)len, stdout);
        written += len;
    }
    return 0;
}
